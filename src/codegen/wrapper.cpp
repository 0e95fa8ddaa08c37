#include "codegen/wrapper.h"

#include <map>

#include <coil/error.h>

#include "runtime/tensor_impl.h"

namespace coil::codegen {

ModuleFuture ready(std::shared_ptr<const jit::Module> module) {
  std::promise<std::shared_ptr<const jit::Module>> now;
  now.set_value(std::move(module));
  return now.get_future().share();
}

Wrapper::Wrapper(WrapperPlan plan, ModuleFuture module, KernelBinder bind)
    : plan_(std::move(plan)),
      module_(std::move(module)),
      bind_(std::move(bind)),
      fns_(plan_.steps.size()) {
  std::map<std::string, int> slot_of;
  for (size_t s = 0; s < plan_.slots.size(); ++s)
    slot_of[plan_.slots[s].name] = static_cast<int>(s);
  for (const WrapperPlan::Step& st : plan_.steps) {
    std::vector<std::vector<int>> arg_slots;
    if (st.kernel.empty()) {
      for (const ir::ExternArg& a : plan_.slots.at(st.extern_slot).call->args) {
        std::vector<int> slots;
        if (auto* r = std::get_if<ir::TensorRef>(&a)) slots.push_back(slot_of.at(r->buffer));
        if (auto* rs = std::get_if<std::vector<ir::TensorRef>>(&a))
          for (const ir::TensorRef& r : *rs) slots.push_back(slot_of.at(r.buffer));
        arg_slots.push_back(std::move(slots));
      }
    }
    extern_arg_slots_.push_back(std::move(arg_slots));
  }
}

void Wrapper::bind_kernels() const {
  const std::shared_ptr<const jit::Module>& module = module_.get();
  for (size_t i = 0; i < plan_.steps.size(); ++i)
    if (!plan_.steps[i].kernel.empty()) fns_[i] = bind_(*module, plan_.steps[i]);
}

Tensor Wrapper::view_of(const Tensor& base, const ir::Layout& view) {
  COIL_ASSERT(base.defined(), "wrapper: a buffer is read after it was released");
  const TensorMeta& m = base.impl()->meta;
  if (view.sizes == m.sizes && view.strides == m.strides && view.offset == 0) return base;
  return alias_with(base, view.sizes, view.strides, m.offset + view.offset);
}

std::vector<Tensor> Wrapper::run(const std::vector<Tensor>& inputs) const {
  const std::vector<WrapperPlan::Slot>& buffers = plan_.slots;
  std::vector<Tensor> slots(buffers.size());
  for (size_t s = 0; s < buffers.size(); ++s) {
    const WrapperPlan::Slot& b = buffers[s];
    if (b.kind == ir::BufferKind::Input) slots[s] = inputs.at(b.input_index);
    if (b.kind == ir::BufferKind::Constant) slots[s] = b.value;
  }
  std::vector<void*> ptrs;
  for (size_t i = 0; i < plan_.steps.size(); ++i) {
    const WrapperPlan::Step& st = plan_.steps[i];
    for (const WrapperPlan::Alloc& a : st.allocs) {
      const ir::Layout& l = buffers[a.slot].layout;
      if (a.reuse >= 0) {
        // In place, the kernel still reads the old slot: both name the same memory.
        slots[a.slot] = a.in_place ? slots[a.reuse] : std::move(slots[a.reuse]);
        slots[a.slot].impl()->meta = TensorMeta{l.dtype, l.sizes, l.strides, 0, plan_.device};
      } else {
        slots[a.slot] = empty_from_meta(TensorMeta{l.dtype, l.sizes, l.strides, 0, plan_.device});
      }
    }
    if (!st.kernel.empty()) {
      std::call_once(bound_, [this] { bind_kernels(); });  // throws again until it succeeds
      ptrs.clear();
      for (int s : st.args) ptrs.push_back(slots[s].impl()->data());
      int64_t index_error[2] = {0, 0};
      if (!st.index_checks.empty()) ptrs.push_back(index_error);
      fns_[i](ptrs.data());
      if (index_error[0] != 0) {
        const IndexCheck& c = st.index_checks.at(static_cast<size_t>(index_error[0] - 1));
        throw Error(detail::str_cat(c.op, ": index ", index_error[1],
                                    " is out of range for a dimension of size ", c.bound,
                                    "; indices must lie in [0, ", c.bound, ")"));
      }
    } else {
      const WrapperPlan::Slot& result = buffers[st.extern_slot];
      const std::vector<ir::ExternArg>& call_args = result.call->args;
      std::vector<Arg> args;
      for (size_t k = 0; k < call_args.size(); ++k) {
        const std::vector<int>& arg_slots = extern_arg_slots_[i][k];
        if (auto* r = std::get_if<ir::TensorRef>(&call_args[k])) {
          args.emplace_back(view_of(slots[arg_slots[0]], r->view));
        } else if (auto* rs = std::get_if<std::vector<ir::TensorRef>>(&call_args[k])) {
          std::vector<Tensor> ts;
          for (size_t j = 0; j < rs->size(); ++j)
            ts.push_back(view_of(slots[arg_slots[j]], (*rs)[j].view));
          args.emplace_back(std::move(ts));
        } else {
          args.push_back(std::get<Arg>(call_args[k]));
        }
      }
      Tensor out = run_eager(result.call->op, args).at(0);
      const ir::Layout& l = result.layout;
      COIL_ASSERT(out.sizes() == l.sizes && out.strides() == l.strides && out.dtype() == l.dtype,
                  "wrapper: extern ", op_name(result.call->op), " returned ",
                  ir::Layout{out.dtype(), out.sizes(), out.strides(), 0}.str(),
                  " where lowering expected ", l.str());
      slots[st.extern_slot] = out;
    }
    for (int s : st.releases) slots[s] = Tensor();
  }
  std::vector<Tensor> results;
  for (const WrapperPlan::Output& o : plan_.outputs)
    results.push_back(view_of(slots[o.slot], o.view));
  return results;
}

}  // namespace coil::codegen
