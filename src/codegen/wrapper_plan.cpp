#include "codegen/wrapper_plan.h"

#include <algorithm>
#include <map>
#include <set>

namespace coil::codegen {

int64_t WrapperPlan::SizeSource::value(const std::vector<Tensor>& inputs) const {
  const Tensor& t = inputs.at(static_cast<size_t>(input));
  return stride ? t.stride(dim) : t.size(dim);
}

size_t WrapperPlan::kernel_count() const {
  return static_cast<size_t>(
      std::count_if(steps.begin(), steps.end(), [](const Step& s) { return !s.kernel.empty(); }));
}

namespace {

// Each size symbol from the first input dim whose size is that symbol, else (an eager call's
// strided input) the first whose stride is.
void find_size_sources(const ir::Program& program, WrapperPlan& plan) {
  for (bool stride : {false, true}) {
    for (const ir::Buffer& b : program.buffers) {
      if (b.kind != ir::BufferKind::Input) continue;
      const SymShape& dims = stride ? b.layout.strides : b.layout.sizes;
      for (size_t d = 0; d < dims.size(); ++d) {
        if (!is_size_symbol(dims[d])) continue;
        const int k = size_symbol_index(dims[d]);
        bool known = false;
        for (const WrapperPlan::SizeSource& s : plan.sizes) known |= s.symbol == k;
        if (known) continue;
        plan.sizes.push_back({k, static_cast<int>(b.input_index), static_cast<int>(d), stride});
        plan.num_sizes = std::max(plan.num_sizes, k + 1);
      }
    }
  }
}

// Every symbol the code reads must come from an input (InternalError otherwise: a kernel
// would read a size nobody set).
void check_size_sources(const ir::Program& program, const std::vector<KernelSource>& kernels,
                        const WrapperPlan& plan) {
  auto check = [&](sym::Expr e) {
    std::vector<sym::Expr> used;
    collect_size_symbols(e, used);
    for (sym::Expr s : used) {
      bool found = false;
      for (const WrapperPlan::SizeSource& src : plan.sizes)
        found |= src.symbol == size_symbol_index(s);
      COIL_ASSERT(found, "wrapper: size ", sym::to_string(s), " is read but no input has it");
    }
  };
  for (const KernelSource& k : kernels) {
    for (sym::Expr s : k.symbols) check(s);
    for (sym::Expr d : k.divisors) check(d);
  }
  for (const ir::Buffer& b : program.buffers) {
    for (sym::Expr e : b.layout.sizes) check(e);
    for (sym::Expr e : b.layout.strides) check(e);
    check(b.layout.offset);
  }
}

// What each step reads and writes, and the step that reads each buffer last (outputs: a step
// past the end, never released).
struct Lifetimes {
  std::vector<std::vector<std::string>> reads, writes;
  std::map<std::string, int> last_use;
};

Lifetimes buffer_lifetimes(const ir::Program& program, const schedule::Schedule& schedule,
                           const std::vector<KernelSource>& kernels) {
  const size_t n = schedule.steps.size();
  Lifetimes l{
      std::vector<std::vector<std::string>>(n), std::vector<std::vector<std::string>>(n), {}};
  for (size_t i = 0; i < n; ++i) {
    const schedule::Step& st = schedule.steps[i];
    if (st.kernel >= 0) {
      l.reads[i] = kernels[st.kernel].args;
      for (const schedule::KernelNode& node : schedule.kernels[st.kernel].nodes)
        if (node.store) l.writes[i].push_back(node.buffer);
    } else {
      l.reads[i] = ir::extern_inputs(*program.buffer(st.buffer).call);
      l.writes[i].push_back(st.buffer);
    }
    for (const std::string& r : l.reads[i]) l.last_use[r] = static_cast<int>(i);
  }
  for (const ir::TensorRef& o : program.outputs) l.last_use[o.buffer] = static_cast<int>(n);
  // A view op's result aliases its argument (as_strided runs as an extern): they live as long.
  for (size_t i = n; i-- > 0;) {
    const schedule::Step& st = schedule.steps[i];
    if (st.kernel >= 0) continue;
    if (op_info(program.buffer(st.buffer).call->op).kind != OpKind::View) continue;
    const int out_last = l.last_use.count(st.buffer) ? l.last_use[st.buffer] : 0;
    for (const std::string& r : l.reads[i]) l.last_use[r] = std::max(l.last_use[r], out_last);
  }
  return l;
}

// A kernel step's call: its symbol, checks, sizes, launch and arguments.
void describe_kernel(const KernelSource& k, const std::map<std::string, int>& slot_of,
                     WrapperPlan::Step& step) {
  step.kernel = k.function_name();
  step.index_checks = k.index_checks;
  for (sym::Expr s : k.symbols) step.symbols.push_back(size_symbol_index(s));
  step.divisors = k.divisors;
  step.launch = k.launch;
  // An identical earlier kernel's alternatives are its own, numbered alike.
  for (size_t n = 0; n < k.alternatives.size(); ++n)
    step.alternatives.push_back({step.kernel + "_at" + std::to_string(n + 1),
                                 k.alternatives[n].divisors, k.alternatives[n].launch});
  for (const std::string& a : k.args) step.args.push_back(slot_of.at(a));
}

// The memory plan: each computed buffer takes over a dead one's memory where it can (in place
// of a buffer its kernel reads last, where the kernel allows, else any dead buffer of the same
// dtype and element count), and each buffer dies after its last reader.
class MemoryPlanner {
 public:
  MemoryPlanner(const ir::Program& program, const std::map<std::string, int>& slot_of,
                Lifetimes& lifetimes)
      : program_(program), slot_of_(slot_of), l_(lifetimes) {}

  void allocate(int i, const KernelSource& k, WrapperPlan::Step& step) {
    for (const std::string& w : l_.writes[i]) {
      const ir::Buffer& b = program_.buffer(w);
      WrapperPlan::Alloc a{slot_of_.at(w)};
      std::string dying;  // a buffer this kernel reads last, which w may overwrite
      for (const auto& [written, read] : k.inplace)
        if (written == w && l_.last_use[read] == i && !taken_in_place_.count(read)) dying = read;
      auto it = free_slots_.find(SlotKey{b.layout.dtype, b.layout.numel()});
      if (!dying.empty()) {
        a.reuse = slot_of_.at(dying);
        a.in_place = true;
        taken_in_place_.insert(dying);
      } else if (it != free_slots_.end()) {
        a.reuse = it->second;
        free_slots_.erase(it);
      }
      step.allocs.push_back(a);
    }
  }

  // Buffers whose last reader is step i die there; computed ones give their memory back.
  void release(int i, WrapperPlan::Step& step) {
    for (const auto& [name, last] : l_.last_use) {
      if (last != i) continue;
      const ir::Buffer& b = program_.buffer(name);
      if (b.kind == ir::BufferKind::Input || b.kind == ir::BufferKind::Constant) continue;
      if (taken_in_place_.count(name)) continue;  // its memory lives on as another buffer
      // A dead computed buffer stays allocated for a later one of the same dtype and size to
      // take over; an extern's result is dropped.
      if (b.kind == ir::BufferKind::Computed)
        free_slots_.emplace(SlotKey{b.layout.dtype, b.layout.numel()}, slot_of_.at(name));
      else
        step.releases.push_back(slot_of_.at(name));
      step.dead.push_back(slot_of_.at(name));
    }
  }

 private:
  // Dead computed buffers by dtype and element count (an expression: equal counts are equal
  // for every size, so one buffer's memory serves the other at any call).
  struct SlotKey {
    DType dtype;
    sym::Expr numel;
    bool operator<(const SlotKey& o) const {
      return dtype != o.dtype ? dtype < o.dtype : sym::less(numel, o.numel);
    }
  };
  const ir::Program& program_;
  const std::map<std::string, int>& slot_of_;
  Lifetimes& l_;
  std::multimap<SlotKey, int> free_slots_;
  std::set<std::string> taken_in_place_;  // died into a buffer written in their place
};

}  // namespace

WrapperPlan plan_wrapper(const ir::Program& program, const schedule::Schedule& schedule,
                         const std::vector<KernelSource>& kernels) {
  WrapperPlan plan;
  plan.device = program.device;
  std::map<std::string, int> slot_of;
  for (const ir::Buffer& b : program.buffers) {
    slot_of[b.name] = static_cast<int>(plan.slots.size());
    plan.slots.push_back({b.name, b.kind, b.layout, b.input_index, b.value, b.call});
  }
  find_size_sources(program, plan);
  check_size_sources(program, kernels, plan);
  Lifetimes lifetimes = buffer_lifetimes(program, schedule, kernels);
  MemoryPlanner memory(program, slot_of, lifetimes);
  for (size_t i = 0; i < schedule.steps.size(); ++i) {
    const schedule::Step& st = schedule.steps[i];
    WrapperPlan::Step step;
    if (st.kernel >= 0) {
      memory.allocate(static_cast<int>(i), kernels[st.kernel], step);
      describe_kernel(kernels[st.kernel], slot_of, step);
    } else {
      step.extern_slot = slot_of.at(st.buffer);
    }
    memory.release(static_cast<int>(i), step);
    plan.steps.push_back(std::move(step));
  }
  for (const ir::TensorRef& o : program.outputs)
    plan.outputs.push_back({slot_of.at(o.buffer), o.view});
  return plan;
}

std::string render_wrapper(const WrapperPlan& plan) {
  auto name = [&](int slot) -> const std::string& { return plan.slots[slot].name; };
  std::string text = "def call(inputs):\n";
  for (const WrapperPlan::SizeSource& s : plan.sizes)
    text += "    s" + std::to_string(s.symbol) + " = inputs[" + std::to_string(s.input) + "]." +
            (s.stride ? "stride(" : "size(") + std::to_string(s.dim) + ")\n";
  for (const WrapperPlan::Step& step : plan.steps) {
    for (const WrapperPlan::Alloc& a : step.allocs) {
      const std::string layout = plan.slots[a.slot].layout.str();
      if (a.in_place)
        text += "    " + name(a.slot) + " = in_place(" + name(a.reuse) + ")  # " + layout + "\n";
      else if (a.reuse >= 0)
        text += "    " + name(a.slot) + " = reuse(" + name(a.reuse) + ")  # " + layout + "\n";
      else
        text += "    " + name(a.slot) + " = empty(" + layout + ")\n";
    }
    if (!step.kernel.empty()) {
      std::string call, checks;
      for (int a : step.args) call += (call.empty() ? "" : ", ") + name(a);
      for (int s : step.symbols) call += (call.empty() ? "s" : ", s") + std::to_string(s);
      for (const IndexCheck& c : step.index_checks)
        checks += (checks.empty() ? "  # raises for an index outside " : ", ") + c.op + "'s [0, " +
                  sym::to_string(c.bound) + ")";
      text += "    " + step.kernel + "(" + call + ")" + checks + "\n";
    } else {
      const ir::ExternCall& c = *plan.slots[step.extern_slot].call;
      text += "    " + name(step.extern_slot) +
              (c.result > 0
                   ? " = result " + std::to_string(c.result) + " of " + c.first + "\n"
                   : " = extern " + std::string(op_name(c.op)) + "(...)  # " + c.reason + "\n");
    }
    for (int d : step.dead) text += "    del " + name(d) + "\n";
  }
  std::string ret;
  for (const WrapperPlan::Output& o : plan.outputs)
    ret += (ret.empty() ? "" : ", ") + name(o.slot) + " " + o.view.str();
  return text + "    return (" + ret + ")\n";
}

}  // namespace coil::codegen
