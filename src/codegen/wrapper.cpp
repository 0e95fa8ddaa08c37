#include "codegen/wrapper.h"

#include <map>
#include <unordered_map>

#include <coil/error.h>

#include "runtime/copy.h"
#include "runtime/cuda_runtime.h"
#include "runtime/profiler.h"
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
    const bool later = st.kernel.empty() && plan_.slots.at(st.extern_slot).call->result > 0;
    first_result_slot_.push_back(later ? slot_of.at(plan_.slots[st.extern_slot].call->first) : -1);
  }
}

void Wrapper::bind_kernels() const {
  const std::shared_ptr<const jit::Module>& module = module_.get();
  for (size_t i = 0; i < plan_.steps.size(); ++i)
    if (!plan_.steps[i].kernel.empty()) fns_[i] = bind_(*module, plan_.steps[i]);
}

namespace {

int64_t value_at(sym::Expr e, const int64_t* sizes) {
  return e->is_const() ? e->value() : evaluate_sizes(e, sizes);
}

Shape values(const SymShape& s, const int64_t* sizes) {
  Shape out(s.size());
  for (size_t k = 0; k < s.size(); ++k) out[k] = value_at(s[k], sizes);
  return out;
}

// A layout at this call's sizes.
TensorMeta meta_at(const ir::Layout& l, const int64_t* sizes, Device device) {
  return TensorMeta{l.dtype, values(l.sizes, sizes), values(l.strides, sizes),
                    evaluate_sizes(l.offset, sizes), device};
}

// An extern call's literal at this call's sizes: a symbolic int becomes its value.
Arg literal_at(const Arg& a, const int64_t* sizes) {
  if (auto* s = std::get_if<SymIntArg>(&a)) return evaluate_sizes(s->expr, sizes);
  if (auto* s = std::get_if<SymIntsArg>(&a)) return values(s->exprs, sizes);
  return a;
}

}  // namespace

Tensor Wrapper::view_of(const Tensor& base, const ir::Layout& view, const int64_t* sizes) {
  COIL_ASSERT(base.defined(), "wrapper: a buffer is read after it was released");
  const TensorMeta& m = base.impl()->meta;
  TensorMeta v = meta_at(view, sizes, m.device);
  if (v.sizes == m.sizes && v.strides == m.strides && v.offset == 0) return base;
  return alias_with(base, v.sizes, v.strides, m.offset + v.offset);
}

namespace {

// Whether `t` has the layout's sizes at this call and, along every dim longer than one, its
// strides (without building either: this runs for every input of every call).
bool laid_out_as(const Tensor& t, const ir::Layout& layout, const int64_t* sizes) {
  const Shape &ts = t.sizes(), &tt = t.strides();
  if (ts.size() != layout.sizes.size()) return false;
  for (size_t k = 0; k < ts.size(); ++k) {
    if (ts[k] != value_at(layout.sizes[k], sizes)) return false;
    if (ts[k] > 1 && tt[k] != value_at(layout.strides[k], sizes)) return false;
  }
  return true;
}

}  // namespace

Tensor Wrapper::checked_result(const Tensor& out, const WrapperPlan::Slot& result,
                               const int64_t* sizes) const {
  const TensorMeta want = meta_at(result.layout, sizes, plan_.device);
  COIL_ASSERT(
      out.sizes() == want.sizes && out.strides() == want.strides && out.dtype() == want.dtype,
      "wrapper: extern ", op_name(result.call->op), " returned ",
      ir::Layout::of(out.dtype(), out.sizes(), out.strides()).str(), " where lowering expected ",
      result.layout.str());
  return out;
}

Tensor Wrapper::as_planned(const Tensor& t, const ir::Layout& layout, const int64_t* sizes) {
  if (laid_out_as(t, layout, sizes) || t.numel() == 0) return t;
  TensorMeta m = meta_at(layout, sizes, t.device());
  m.dtype = t.dtype();
  Tensor planned = empty_from_meta(m);
  copy_into(planned, t);
  return planned;
}

struct Wrapper::Call {
  std::vector<int64_t> size_values;
  const int64_t* sizes = nullptr;  // size_values' data, or null for a static graph
  std::vector<Tensor> slots;
  std::vector<void*> ptrs;  // a kernel's arguments
  // The results past the first of the calls that return several, by their first's slot.
  std::unordered_map<int, std::vector<Tensor>> call_results;
  // Inputs per storage, and whether a CUDA graph records: when a result goes into an input.
  std::unordered_map<const void*, int> input_storages;
  bool recording = false;
};

std::vector<Tensor> Wrapper::run(const std::vector<Tensor>& inputs, const Tensor* into) const {
  Call call;
  // A dynamic graph's sizes at this call, read from its inputs.
  call.size_values.assign(static_cast<size_t>(plan_.num_sizes), 0);
  for (const WrapperPlan::SizeSource& s : plan_.sizes)
    call.size_values[static_cast<size_t>(s.symbol)] = s.value(inputs);
  call.sizes = call.size_values.empty() ? nullptr : call.size_values.data();
  // The kernels index each input as its layout says (guards hold a user's inputs to it; a
  // backward's saved tensors are as the forward returned them).
  call.slots.resize(plan_.slots.size());
  for (size_t s = 0; s < plan_.slots.size(); ++s) {
    const WrapperPlan::Slot& b = plan_.slots[s];
    if (b.kind == ir::BufferKind::Input)
      call.slots[s] = as_planned(inputs.at(b.input_index), b.layout, call.sizes);
    if (b.kind == ir::BufferKind::Constant) call.slots[s] = b.value;
  }
  for (size_t i = 0; i < plan_.steps.size(); ++i) {
    const WrapperPlan::Step& st = plan_.steps[i];
    for (const WrapperPlan::Alloc& a : st.allocs) allocate(a, call, into);
    if (!st.kernel.empty())
      run_kernel(i, call);
    else
      run_extern(i, call);
    for (int s : st.releases) call.slots[s] = Tensor();
  }
  std::vector<Tensor> results;
  for (const WrapperPlan::Output& o : plan_.outputs)
    results.push_back(view_of(call.slots[o.slot], o.view, call.sizes));
  return results;
}

void Wrapper::allocate(const WrapperPlan::Alloc& a, Call& call, const Tensor* into) const {
  const std::vector<WrapperPlan::Slot>& buffers = plan_.slots;
  std::vector<Tensor>& slots = call.slots;
  TensorMeta m = meta_at(buffers[a.slot].layout, call.sizes, plan_.device);
  if (a.reuse >= 0 && buffers[a.reuse].kind == ir::BufferKind::Input) {
    // A result the caller writes back into this input, written there (Program::
    // written_back): an alias of the caller's tensor, unless its layout is not the one
    // planned or another input shares its memory (then a buffer of its own, copied back).
    // Not while a CUDA graph records: its inputs are the graph's static copies, and a
    // replay's results that alias one stand for the caller's tensor, which it never wrote.
    if (call.input_storages.empty()) {
      call.recording = cuda::capturing(m.device);
      for (size_t s = 0; s < buffers.size(); ++s)
        if (buffers[s].kind == ir::BufferKind::Input && slots[s].defined())
          ++call.input_storages[slots[s].impl()->storage.get()];
    }
    const Tensor& in = slots[a.reuse];
    slots[a.slot] = in.sizes() == m.sizes && in.strides() == m.strides && !call.recording &&
                            call.input_storages[in.impl()->storage.get()] == 1
                        ? alias_with(in, m.sizes, m.strides, in.impl()->meta.offset)
                        : empty_from_meta(m);
  } else if (a.reuse >= 0) {
    // In place, the kernel still reads the old slot: both name the same memory.
    slots[a.slot] = a.in_place ? slots[a.reuse] : std::move(slots[a.reuse]);
    slots[a.slot].impl()->meta = std::move(m);
  } else if (into && a.slot == plan_.outputs.at(0).slot &&
             plan_.outputs[0].view == buffers[a.slot].layout && m.dtype == into->dtype() &&
             m.sizes == into->sizes() && m.strides == into->strides() &&
             m.device == into->device()) {
    slots[a.slot] = *into;
  } else {
    slots[a.slot] = empty_from_meta(m);
  }
}

void Wrapper::run_kernel(size_t step, Call& call) const {
  const WrapperPlan::Step& st = plan_.steps[step];
  std::call_once(bound_, [this] { bind_kernels(); });  // throws again until it succeeds
  call.ptrs.clear();
  for (int s : st.args) call.ptrs.push_back(call.slots[s].impl()->data());
  int64_t index_error[2] = {0, 0};
  if (!st.index_checks.empty()) call.ptrs.push_back(index_error);
  if (!st.symbols.empty()) call.ptrs.push_back(call.size_values.data());
  {
    ProfileScope profiled("kernel", st.kernel, plan_.device);
    fns_[step](call.ptrs.data(), call.sizes);
  }
  if (index_error[0] != 0) {
    const IndexCheck& c = st.index_checks.at(static_cast<size_t>(index_error[0] - 1));
    const int64_t bound = evaluate_sizes(c.bound, call.sizes);
    throw Error(index_error_message(c.op, index_error[1], bound));
  }
}

void Wrapper::run_extern(size_t step, Call& call) const {
  const WrapperPlan::Step& st = plan_.steps[step];
  const WrapperPlan::Slot& result = plan_.slots[st.extern_slot];
  if (first_result_slot_[step] >= 0) {  // a later result of an earlier step's call
    auto it = call.call_results.find(first_result_slot_[step]);
    COIL_ASSERT(it != call.call_results.end() &&
                    static_cast<size_t>(result.call->result) < it->second.size(),
                "wrapper: result ", result.call->result, " of ", op_name(result.call->op),
                " before its call");
    call.slots[st.extern_slot] =
        checked_result(it->second[result.call->result], result, call.sizes);
    return;
  }
  const std::vector<ir::ExternArg>& call_args = result.call->args;
  std::vector<Arg> args;
  for (size_t k = 0; k < call_args.size(); ++k) {
    const std::vector<int>& arg_slots = extern_arg_slots_[step][k];
    if (auto* r = std::get_if<ir::TensorRef>(&call_args[k])) {
      args.emplace_back(view_of(call.slots[arg_slots[0]], r->view, call.sizes));
    } else if (auto* rs = std::get_if<std::vector<ir::TensorRef>>(&call_args[k])) {
      std::vector<Tensor> ts;
      for (size_t j = 0; j < rs->size(); ++j)
        ts.push_back(view_of(call.slots[arg_slots[j]], (*rs)[j].view, call.sizes));
      args.emplace_back(std::move(ts));
    } else {
      args.push_back(literal_at(std::get<Arg>(call_args[k]), call.sizes));
    }
  }
  std::vector<Tensor> outs;
  {
    ProfileScope profiled("library", op_name(result.call->op), plan_.device);
    outs = run_eager(result.call->op, args);
  }
  call.slots[st.extern_slot] = checked_result(outs.at(0), result, call.sizes);
  if (outs.size() > 1) call.call_results[st.extern_slot] = std::move(outs);
}

}  // namespace coil::codegen
