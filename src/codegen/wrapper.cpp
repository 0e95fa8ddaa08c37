#include "codegen/wrapper.h"

#include <algorithm>
#include <set>

#include <coil/error.h>

#include "codegen/cpp_prelude.h"
#include "runtime/tensor_impl.h"

namespace coil::codegen {

namespace {

// Slots a step reads: kernel arguments and extern tensor arguments.
std::vector<std::string> extern_inputs(const ir::Buffer& b) {
  std::vector<std::string> out;
  for (const ir::ExternArg& a : b.call->args) {
    if (auto* r = std::get_if<ir::TensorRef>(&a)) out.push_back(r->buffer);
    if (auto* rs = std::get_if<std::vector<ir::TensorRef>>(&a))
      for (const ir::TensorRef& r : *rs) out.push_back(r.buffer);
  }
  return out;
}

}  // namespace

std::string cpp_source(const std::vector<KernelSource>& kernels) {
  std::string s = cpp_prelude();
  for (const KernelSource& k : kernels) s += "\n" + k.code;
  return s;
}

Wrapper::Wrapper(const ir::Program& program, const schedule::Schedule& schedule,
                 const std::vector<KernelSource>& kernels,
                 std::shared_ptr<const jit::Library> library)
    : library_(std::move(library)) {
  for (const ir::Buffer& b : program.buffers) {
    slot_of_[b.name] = static_cast<int>(buffers_.size());
    buffers_.push_back(&b);
  }
  // Which step fills each buffer and which step reads it last (outputs: never released).
  const int kForever = static_cast<int>(schedule.steps.size());
  std::map<std::string, int> last_use;
  std::vector<std::vector<std::string>> reads(schedule.steps.size()), writes(schedule.steps.size());
  for (size_t i = 0; i < schedule.steps.size(); ++i) {
    const schedule::Step& st = schedule.steps[i];
    if (st.kernel >= 0) {
      const KernelSource& k = kernels[st.kernel];
      for (const std::string& a : k.args) reads[i].push_back(a);
      for (const schedule::KernelNode& n : schedule.kernels[st.kernel].nodes)
        if (n.store) writes[i].push_back(n.buffer);
    } else {
      reads[i] = extern_inputs(program.buffer(st.buffer));
      writes[i].push_back(st.buffer);
    }
    for (const std::string& r : reads[i]) last_use[r] = static_cast<int>(i);
  }
  for (const ir::TensorRef& o : program.outputs) last_use[o.buffer] = kForever;
  // A view op's result aliases its argument (as_strided runs as an extern): they live as long.
  for (size_t i = schedule.steps.size(); i-- > 0;) {
    if (schedule.steps[i].kernel >= 0) continue;
    if (op_info(program.buffer(schedule.steps[i].buffer).call->op).kind != OpKind::View) continue;
    int out_last =
        last_use.count(schedule.steps[i].buffer) ? last_use[schedule.steps[i].buffer] : 0;
    for (const std::string& r : reads[i]) last_use[r] = std::max(last_use[r], out_last);
  }

  std::multimap<std::pair<DType, int64_t>, int> free_slots;  // dead computed buffers
  std::set<std::string> taken_in_place;  // died into a buffer written in their place
  text_ = "def call(inputs):\n";
  for (size_t i = 0; i < schedule.steps.size(); ++i) {
    const schedule::Step& st = schedule.steps[i];
    StepPlan plan;
    if (st.kernel >= 0) {
      for (const std::string& w : writes[i]) {
        const ir::Buffer& b = program.buffer(w);
        Alloc a{slot_of_.at(w)};
        std::string dying;  // a buffer this kernel reads last, which w may overwrite
        for (const auto& [written, read] : kernels[st.kernel].inplace)
          if (written == w && last_use[read] == static_cast<int>(i) && !taken_in_place.count(read))
            dying = read;
        auto it = free_slots.find({b.layout.dtype, b.layout.numel()});
        if (!dying.empty()) {
          a.reuse = slot_of_.at(dying);
          a.in_place = true;
          taken_in_place.insert(dying);
          text_ += "    " + w + " = in_place(" + dying + ")  # " + b.layout.str() + "\n";
        } else if (it != free_slots.end()) {
          a.reuse = it->second;
          free_slots.erase(it);
          text_ +=
              "    " + w + " = reuse(" + buffers_[a.reuse]->name + ")  # " + b.layout.str() + "\n";
        } else {
          text_ += "    " + w + " = empty(" + b.layout.str() + ")\n";
        }
        plan.allocs.push_back(a);
      }
      const KernelSource& k = kernels[st.kernel];
      plan.fn = reinterpret_cast<KernelFn>(library_->symbol(k.name));
      plan.index_checks = k.index_checks;
      std::string call;
      for (const std::string& a : k.args) {
        plan.args.push_back(slot_of_.at(a));
        call += (call.empty() ? "" : ", ") + a;
      }
      std::string checks;
      for (const IndexCheck& c : k.index_checks)
        checks += (checks.empty() ? "  # raises for an index outside " : ", ") + c.op + "'s [0, " +
                  std::to_string(c.bound) + ")";
      text_ += "    " + k.name + "(" + call + ")" + checks + "\n";
    } else {
      const ir::Buffer& b = program.buffer(st.buffer);
      plan.extern_buffer = &b;
      plan.extern_slot = slot_of_.at(b.name);
      for (const ir::ExternArg& a : b.call->args) {
        std::vector<int> arg_slots;
        if (auto* r = std::get_if<ir::TensorRef>(&a)) arg_slots.push_back(slot_of_.at(r->buffer));
        if (auto* rs = std::get_if<std::vector<ir::TensorRef>>(&a))
          for (const ir::TensorRef& r : *rs) arg_slots.push_back(slot_of_.at(r.buffer));
        plan.extern_arg_slots.push_back(std::move(arg_slots));
      }
      text_ += "    " + b.name + " = extern " + op_name(b.call->op) + "(...)  # " + b.call->reason +
               "\n";
    }
    // Buffers whose last reader is this step die here; computed ones give their memory back.
    for (const auto& [name, last] : last_use) {
      if (last != static_cast<int>(i)) continue;
      const ir::Buffer& b = program.buffer(name);
      if (b.kind == ir::BufferKind::Input || b.kind == ir::BufferKind::Constant) continue;
      if (taken_in_place.count(name)) continue;  // its memory lives on as another buffer
      // A dead computed buffer stays allocated for a later one of the same dtype and size to
      // take over; an extern's result is dropped.
      if (b.kind == ir::BufferKind::Computed)
        free_slots.emplace(std::make_pair(b.layout.dtype, b.layout.numel()), slot_of_.at(name));
      else
        plan.releases.push_back(slot_of_.at(name));
      text_ += "    del " + name + "\n";
    }
    steps_.push_back(std::move(plan));
  }
  std::string ret;
  for (const ir::TensorRef& o : program.outputs) {
    outputs_.push_back(OutputPlan{slot_of_.at(o.buffer), o.view});
    ret += (ret.empty() ? "" : ", ") + o.buffer + " " + o.view.str();
  }
  text_ += "    return (" + ret + ")\n";
}

Tensor Wrapper::view_of(const Tensor& base, const ir::Layout& view) {
  COIL_ASSERT(base.defined(), "wrapper: a buffer is read after it was released");
  const TensorMeta& m = base.impl()->meta;
  if (view.sizes == m.sizes && view.strides == m.strides && view.offset == 0) return base;
  return alias_with(base, view.sizes, view.strides, m.offset + view.offset);
}

std::vector<Tensor> Wrapper::run(const std::vector<Tensor>& inputs) const {
  std::vector<Tensor> slots(buffers_.size());
  for (size_t s = 0; s < buffers_.size(); ++s) {
    const ir::Buffer& b = *buffers_[s];
    if (b.kind == ir::BufferKind::Input) slots[s] = inputs.at(b.input_index);
    if (b.kind == ir::BufferKind::Constant) slots[s] = b.value;
  }
  std::vector<void*> ptrs;
  for (const StepPlan& st : steps_) {
    for (const Alloc& a : st.allocs) {
      const ir::Layout& l = buffers_[a.slot]->layout;
      if (a.reuse >= 0) {
        // In place, the kernel still reads the old slot: both name the same memory.
        slots[a.slot] = a.in_place ? slots[a.reuse] : std::move(slots[a.reuse]);
        slots[a.slot].impl()->meta = TensorMeta{l.dtype, l.sizes, l.strides, 0, kCPU};
      } else {
        slots[a.slot] = empty_from_meta(TensorMeta{l.dtype, l.sizes, l.strides, 0, kCPU});
      }
    }
    if (st.fn) {
      ptrs.clear();
      for (int s : st.args) ptrs.push_back(slots[s].impl()->data());
      int64_t index_error[2] = {0, 0};
      if (!st.index_checks.empty()) ptrs.push_back(index_error);
      st.fn(ptrs.data());
      if (index_error[0] != 0) {
        const IndexCheck& c = st.index_checks.at(static_cast<size_t>(index_error[0] - 1));
        throw Error(detail::str_cat(c.op, ": index ", index_error[1],
                                    " is out of range for a dimension of size ", c.bound,
                                    "; indices must lie in [0, ", c.bound, ")"));
      }
    } else {
      std::vector<Arg> args;
      const std::vector<ir::ExternArg>& call_args = st.extern_buffer->call->args;
      for (size_t i = 0; i < call_args.size(); ++i) {
        const std::vector<int>& arg_slots = st.extern_arg_slots[i];
        if (auto* r = std::get_if<ir::TensorRef>(&call_args[i])) {
          args.emplace_back(view_of(slots[arg_slots[0]], r->view));
        } else if (auto* rs = std::get_if<std::vector<ir::TensorRef>>(&call_args[i])) {
          std::vector<Tensor> ts;
          for (size_t j = 0; j < rs->size(); ++j)
            ts.push_back(view_of(slots[arg_slots[j]], (*rs)[j].view));
          args.emplace_back(std::move(ts));
        } else {
          args.push_back(std::get<Arg>(call_args[i]));
        }
      }
      Tensor out = run_eager(st.extern_buffer->call->op, args).at(0);
      const ir::Layout& l = st.extern_buffer->layout;
      COIL_ASSERT(out.sizes() == l.sizes && out.strides() == l.strides && out.dtype() == l.dtype,
                  "wrapper: extern ", op_name(st.extern_buffer->call->op), " returned ",
                  ir::Layout{out.dtype(), out.sizes(), out.strides(), 0}.str(),
                  " where lowering expected ", l.str());
      slots[st.extern_slot] = out;
    }
    for (int s : st.releases) slots[s] = Tensor();
  }
  std::vector<Tensor> results;
  for (const OutputPlan& o : outputs_) results.push_back(view_of(slots[o.slot], o.view));
  return results;
}

}  // namespace coil::codegen
