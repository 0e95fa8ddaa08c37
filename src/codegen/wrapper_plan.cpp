#include "codegen/wrapper_plan.h"

#include <algorithm>
#include <map>
#include <set>

namespace coil::codegen {

std::vector<std::string> extern_inputs(const ir::ExternCall& call) {
  std::vector<std::string> out;
  for (const ir::ExternArg& a : call.args) {
    if (auto* r = std::get_if<ir::TensorRef>(&a)) out.push_back(r->buffer);
    if (auto* rs = std::get_if<std::vector<ir::TensorRef>>(&a))
      for (const ir::TensorRef& r : *rs) out.push_back(r.buffer);
  }
  return out;
}

size_t WrapperPlan::kernel_count() const {
  return static_cast<size_t>(
      std::count_if(steps.begin(), steps.end(), [](const Step& s) { return !s.kernel.empty(); }));
}

WrapperPlan plan_wrapper(const ir::Program& program, const schedule::Schedule& schedule,
                         const std::vector<KernelSource>& kernels) {
  WrapperPlan plan;
  std::map<std::string, int> slot_of;
  for (const ir::Buffer& b : program.buffers) {
    slot_of[b.name] = static_cast<int>(plan.slots.size());
    plan.slots.push_back({b.name, b.kind, b.layout, b.input_index, b.value, b.call});
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
      reads[i] = extern_inputs(*program.buffer(st.buffer).call);
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
  std::string& text = plan.text;
  text = "def call(inputs):\n";
  for (size_t i = 0; i < schedule.steps.size(); ++i) {
    const schedule::Step& st = schedule.steps[i];
    WrapperPlan::Step step;
    if (st.kernel >= 0) {
      for (const std::string& w : writes[i]) {
        const ir::Buffer& b = program.buffer(w);
        WrapperPlan::Alloc a{slot_of.at(w)};
        std::string dying;  // a buffer this kernel reads last, which w may overwrite
        for (const auto& [written, read] : kernels[st.kernel].inplace)
          if (written == w && last_use[read] == static_cast<int>(i) && !taken_in_place.count(read))
            dying = read;
        auto it = free_slots.find({b.layout.dtype, b.layout.numel()});
        if (!dying.empty()) {
          a.reuse = slot_of.at(dying);
          a.in_place = true;
          taken_in_place.insert(dying);
          text += "    " + w + " = in_place(" + dying + ")  # " + b.layout.str() + "\n";
        } else if (it != free_slots.end()) {
          a.reuse = it->second;
          free_slots.erase(it);
          text +=
              "    " + w + " = reuse(" + plan.slots[a.reuse].name + ")  # " + b.layout.str() + "\n";
        } else {
          text += "    " + w + " = empty(" + b.layout.str() + ")\n";
        }
        step.allocs.push_back(a);
      }
      const KernelSource& k = kernels[st.kernel];
      step.kernel = k.name;
      step.index_checks = k.index_checks;
      std::string call;
      for (const std::string& a : k.args) {
        step.args.push_back(slot_of.at(a));
        call += (call.empty() ? "" : ", ") + a;
      }
      std::string checks;
      for (const IndexCheck& c : k.index_checks)
        checks += (checks.empty() ? "  # raises for an index outside " : ", ") + c.op + "'s [0, " +
                  std::to_string(c.bound) + ")";
      text += "    " + k.name + "(" + call + ")" + checks + "\n";
    } else {
      const ir::Buffer& b = program.buffer(st.buffer);
      step.extern_slot = slot_of.at(b.name);
      text += "    " + b.name + " = extern " + op_name(b.call->op) + "(...)  # " + b.call->reason +
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
        free_slots.emplace(std::make_pair(b.layout.dtype, b.layout.numel()), slot_of.at(name));
      else
        step.releases.push_back(slot_of.at(name));
      text += "    del " + name + "\n";
    }
    plan.steps.push_back(std::move(step));
  }
  std::string ret;
  for (const ir::TensorRef& o : program.outputs) {
    plan.outputs.push_back({slot_of.at(o.buffer), o.view});
    ret += (ret.empty() ? "" : ", ") + o.buffer + " " + o.view.str();
  }
  text += "    return (" + ret + ")\n";
  return plan;
}

}  // namespace coil::codegen
