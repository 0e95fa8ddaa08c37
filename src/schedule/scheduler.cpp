#include "schedule/scheduler.h"

#include <map>
#include <set>

#include <coil/error.h>

#include "heuristics/heuristics.h"
#include "schedule/loops.h"

namespace coil::schedule {

namespace {

// Whether a buffer may join a kernel, and why.
struct Verdict {
  bool ok;
  std::string reason;
  static Verdict yes(std::string r) { return {true, std::move(r)}; }
  static Verdict no(std::string r) { return {false, std::move(r)}; }
};

sym::Expr outer_numel(const ir::Computation& c) { return sym_numel(c.ranges); }
sym::Expr inner_numel(const ir::Computation& c) { return sym_numel(c.reduction_ranges); }

// The buffers a computation reads.
std::set<std::string> reads_of(const ir::Computation& c) {
  std::set<std::string> out;
  ir::for_each_load(c.body, [&](const ir::ValueNode& l) { out.insert(l.buffer()); });
  return out;
}

// A kernel under construction: its members, in order.
struct Group {
  std::vector<const ir::Buffer*> members;

  const ir::Computation* anchor() const {
    for (const ir::Buffer* b : members)
      if (b->compute->is_reduction()) return &*b->compute;
    return &*members.front()->compute;
  }
  bool has_member(const std::string& name) const {
    for (const ir::Buffer* b : members)
      if (b->name == name) return true;
    return false;
  }
};

std::string sizes_str(sym::Expr outer, sym::Expr inner, bool reduction) {
  return reduction ? sym::to_string(outer) + " x " + sym::to_string(inner) + " reduction"
                   : sym::to_string(outer) + " points";
}

// Do the iteration spaces fit? A pointwise node joins a reduction kernel inside its loop (outer x
// inner points) or after it (outer points); two reductions must reduce the same ranges.
Verdict fits(const Group& g, const ir::Buffer& b) {
  const ir::Computation& a = *g.anchor();
  const ir::Computation& c = *b.compute;
  bool ka = a.is_reduction(), kc = c.is_reduction();
  sym::Expr ao = outer_numel(a), ai = inner_numel(a), co = outer_numel(c), ci = inner_numel(c);
  std::string what =
      "kernel of " + sizes_str(ao, ai, ka) + " and " + b.name + " of " + sizes_str(co, ci, kc);
  if (!ka && !kc)
    return ao == co ? Verdict::yes("same iteration space: " + what)
                    : Verdict::no("different sizes: " + what);
  if (ka && kc)
    return ao == co && ai == ci ? Verdict::yes("same reduction ranges: " + what)
                                : Verdict::no("different reduction ranges: " + what);
  if (ka) {
    if (co == ao * ai) return Verdict::yes("pointwise inside the reduction loop: " + what);
    if (co == ao) return Verdict::yes("pointwise after the reduction: " + what);
    return Verdict::no("sizes do not divide into the reduction's loops: " + what);
  }
  if (ao == co * ci) return Verdict::yes("pointwise producer inside the reduction loop: " + what);
  if (ao == co) return Verdict::yes("pointwise before the reduction: " + what);
  return Verdict::no("sizes do not divide into the reduction's loops: " + what);
}

// Every read of a member's buffer must be of the very element the member computes at the same
// loop point: then the value is at hand in a register, with no other thread or loop iteration
// involved.
Verdict same_elements(const Group& g, const ir::Buffer& b) {
  std::vector<const ir::Buffer*> members = g.members;
  members.push_back(&b);
  LoopNest loops = loop_nest(members);
  KernelNode candidate = translate(b, loops);
  std::map<std::string, KernelNode> produced;
  for (const ir::Buffer* m : g.members) produced.emplace(m->name, translate(*m, loops));
  std::string problem;
  ir::for_each_load(candidate.body, [&](const ir::ValueNode& l) {
    auto it = produced.find(l.buffer());
    if (it == produced.end() || !problem.empty()) return;
    if (l.is_indirect()) {
      problem = b.name + " reads " + l.buffer() + " at a data-dependent index (" +
                sym::to_string(l.index()) + "), not at the point the kernel computes";
    } else if (l.index() != it->second.store_index) {
      problem = b.name + " reads " + l.buffer() + "[" + sym::to_string(l.index()) +
                "] where the kernel writes " + l.buffer() + "[" +
                sym::to_string(it->second.store_index) + "]";
    } else if (it->second.inner && !candidate.inner) {
      problem = b.name + " runs after the reduction loop but reads " + l.buffer() +
                ", computed inside it";
    }
  });
  return problem.empty() ? Verdict::yes("") : Verdict::no(problem);
}

// A loop that walks more arrays than this at once for work that shares nothing loses on both
// devices. On the CPU it outruns the cores' hardware prefetchers, which follow a few dozen
// streams: an optimizer step whose updates of 24 weight matrices of one size shared a loop (7
// arrays each) ran at a fifth of the copy bandwidth. On the GPU each thread holds every update's
// loads in registers at once, and when an update writes into its argument (an optimizer's
// parameters and moments) the next update's loads cannot move above its stores: GPT-2's AdamW
// step, 12 updates a loop, ran far from the copy bandwidth. Apart, the updates become a combo
// kernel's parts (schedule/horizontal.cpp), one launch all the same.
constexpr size_t kMaxUnrelatedStreams = 16;

// The arrays a kernel of g's members and b walks: what they read and what they compute (each
// member counted as written: an upper bound).
size_t streams(const Group& g, const ir::Buffer& b) {
  std::set<std::string> arrays;
  for (const ir::Buffer* m : g.members) {
    arrays.insert(m->name);
    for (const std::string& r : reads_of(*m->compute)) arrays.insert(r);
  }
  arrays.insert(b.name);
  for (const std::string& r : reads_of(*b.compute)) arrays.insert(r);
  return arrays.size();
}

// A node that reads nothing `g` computes only shares its iteration space: it joins while `g` is
// small (kMaxUnrelatedFusionNodes) and walks few arrays (kMaxUnrelatedStreams).
Verdict room_for_unrelated(const Group& g, const ir::Buffer& b,
                           const heuristics::DeviceHeuristics& device) {
  for (const std::string& r : reads_of(*b.compute))
    if (g.has_member(r)) return Verdict::yes("");
  if (g.members.size() >= kMaxUnrelatedFusionNodes)
    return Verdict::no("the kernel is full: " + std::to_string(g.members.size()) + " nodes, and " +
                       b.name + " reads none of them");
  if (const size_t arrays = streams(g, b); arrays > kMaxUnrelatedStreams)
    return Verdict::no("the kernel would walk " + std::to_string(arrays) + " arrays at once (" +
                       device.many_streams_cost() + "), and " + b.name +
                       " reads none of its nodes");
  return Verdict::yes("");
}

// A pointwise node that reads nothing the kernel computes joins a reduction's loop only when it
// reads an element that the kernel's nodes read at the same point; so does a reduction that
// reads nothing of a pointwise kernel it would take inside its loop. Otherwise the two walk
// their inputs in different orders (a sum down columns beside a pass along the rows: a bias's
// gradient beside the gradient itself), share no load, and on the GPU one of them reads
// uncoalesced; apart, each kernel takes its own best order.
Verdict shares_reads(const Group& g, const ir::Buffer& b) {
  const ir::Computation& a = *g.anchor();
  const ir::Computation& c = *b.compute;
  if (a.is_reduction() == c.is_reduction()) return Verdict::yes("");
  const ir::Computation& reduction = a.is_reduction() ? a : c;
  const ir::Computation& pointwise = a.is_reduction() ? c : a;
  if (outer_numel(pointwise) != outer_numel(reduction) * inner_numel(reduction))
    return Verdict::yes("");
  for (const std::string& r : reads_of(c))
    if (g.has_member(r)) return Verdict::yes("");
  std::vector<const ir::Buffer*> members = g.members;
  members.push_back(&b);
  LoopNest loops = loop_nest(members);
  std::set<std::pair<std::string, const void*>> read;  // index expressions are hash-consed
  for (const ir::Buffer* m : g.members)
    ir::for_each_load(translate(*m, loops).body,
                      [&](const ir::ValueNode& l) { read.emplace(l.buffer(), l.index().get()); });
  bool shared = false;
  ir::for_each_load(translate(b, loops).body, [&](const ir::ValueNode& l) {
    shared = shared || read.count({l.buffer(), l.index().get()}) > 0;
  });
  return shared
             ? Verdict::yes("")
             : Verdict::no(b.name + " reads none of the elements the kernel reads at each point");
}

// How many earlier steps a node may move back to join a kernel: bounds the search.
constexpr int kFusionWindow = 8;

}  // namespace

bool Kernel::is_reduction() const { return !inner.empty(); }

std::string FusionDecision::str() const {
  const std::string why = reason.empty() ? "" : ": " + reason;
  switch (kind) {
    case Kind::fuse:
      return "fuse " + subject + " into " + kernel + why;
    case Kind::do_not_fuse:
      return "do not fuse " + subject + " into " + kernel + why;
    case Kind::new_kernel:
      return "new " + kernel + " for " + subject + why;
    case Kind::combine:
      return "combine " + subject + " into " + kernel + why;
    case Kind::do_not_combine:
      return "do not combine " + subject + " with " + kernel + why;
  }
  return "";
}

std::string fused_name(const std::string& kind, const std::vector<std::string>& ops, int number) {
  std::string name = kind + "_fused_";
  for (size_t i = 0; i < ops.size() && i < kMaxNameOps; ++i) name += ops[i] + "_";
  return name + std::to_string(number);
}

// Fills each kernel's final_reads. An extern's result may be a view of its arguments (views run
// as externs): whatever reads it later reads them too.
void mark_final_reads(const ir::Program& program, Schedule& s) {
  std::vector<std::set<std::string>> reads(s.steps.size());
  std::map<std::string, size_t> last;  // buffer -> the last step that reads it
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const Step& st = s.steps[i];
    if (st.kernel >= 0) {
      const Kernel& k = s.kernels[st.kernel];
      for (const KernelNode& n : k.nodes)
        ir::for_each_load(n.body, [&](const ir::ValueNode& l) { reads[i].insert(l.buffer()); });
      for (const KernelNode& n : k.nodes) reads[i].erase(n.buffer);
    } else {
      for (const std::string& r : ir::extern_inputs(*program.buffer(st.buffer).call))
        reads[i].insert(r);
    }
    for (const std::string& r : reads[i]) last[r] = i;
  }
  for (const ir::TensorRef& o : program.outputs) last[o.buffer] = s.steps.size();
  for (size_t i = s.steps.size(); i-- > 0;) {
    if (s.steps[i].kernel >= 0) continue;
    auto it = last.find(s.steps[i].buffer);
    if (it == last.end()) continue;
    for (const std::string& r : reads[i]) last[r] = std::max(last[r], it->second);
  }
  for (size_t i = 0; i < s.steps.size(); ++i)
    if (s.steps[i].kernel >= 0)
      for (const std::string& r : reads[i])
        if (last[r] == i) s.kernels[s.steps[i].kernel].final_reads.insert(r);
}

Schedule schedule(const ir::Program& program) {
  Schedule s;
  std::vector<Group> groups;
  std::map<std::string, int> step_of;  // buffer -> the step that fills it
  const heuristics::DeviceHeuristics& device = heuristics::for_device(program.device);
  std::vector<int> kernel_of_decision;  // the group each decision is about, by number
  auto decide = [&](FusionDecision::Kind kind, const std::string& buffer, int group,
                    std::string reason) {
    s.decisions.push_back({kind, buffer, "", std::move(reason)});
    kernel_of_decision.push_back(group);
  };
  for (const ir::Buffer& b : program.buffers) {
    if (b.kind == ir::BufferKind::Extern) {
      step_of[b.name] = static_cast<int>(s.steps.size());
      s.steps.push_back(Step{-1, b.name});
      continue;
    }
    if (b.kind != ir::BufferKind::Computed) continue;
    int after = -1;  // the latest step this buffer depends on
    for (const std::string& r : reads_of(*b.compute))
      if (auto it = step_of.find(r); it != step_of.end()) after = std::max(after, it->second);
    int chosen = -1;
    for (int i = static_cast<int>(s.steps.size()) - 1;
         i >= std::max(after, 0) && i >= static_cast<int>(s.steps.size()) - kFusionWindow; --i) {
      if (s.steps[i].kernel < 0) continue;
      Group& g = groups[s.steps[i].kernel];
      Verdict d = fits(g, b);
      if (d.ok) {
        if (Verdict e = room_for_unrelated(g, b, device); !e.ok) d = e;
      }
      for (auto check : {shares_reads, same_elements}) {
        if (!d.ok) break;
        if (Verdict e = check(g, b); !e.ok) d = e;
      }
      decide(d.ok ? FusionDecision::Kind::fuse : FusionDecision::Kind::do_not_fuse, b.name,
             s.steps[i].kernel, d.reason);
      if (d.ok) {
        chosen = i;
        break;
      }
    }
    if (chosen < 0) {
      chosen = static_cast<int>(s.steps.size());
      s.steps.push_back(Step{static_cast<int>(groups.size()), ""});
      groups.push_back(Group{});
      decide(FusionDecision::Kind::new_kernel, b.name, static_cast<int>(groups.size()) - 1, "");
    }
    groups[s.steps[chosen].kernel].members.push_back(&b);
    step_of[b.name] = chosen;
  }

  // A buffer is stored when something outside its kernel reads it, or the graph returns it.
  std::set<std::string> needed;
  for (const ir::TensorRef& o : program.outputs) needed.insert(o.buffer);
  for (const ir::Buffer& b : program.buffers) {
    if (b.kind == ir::BufferKind::Extern) {
      for (const std::string& r : ir::extern_inputs(*b.call)) needed.insert(r);
    } else if (b.kind == ir::BufferKind::Computed) {
      int mine = step_of.at(b.name);
      for (const std::string& r : reads_of(*b.compute))
        if (auto it = step_of.find(r); it != step_of.end() && it->second != mine) needed.insert(r);
    }
  }
  for (size_t k = 0; k < groups.size(); ++k) {
    Kernel kernel = build_kernel(groups[k].members, static_cast<int>(k));
    for (KernelNode& n : kernel.nodes) n.store = needed.count(n.buffer) > 0;
    s.kernels.push_back(std::move(kernel));
  }
  // The decisions were made while each kernel's members, which its name comes from, were still
  // coming: they name it now.
  for (size_t i = 0; i < s.decisions.size(); ++i)
    s.decisions[i].kernel = s.kernels.at(static_cast<size_t>(kernel_of_decision[i])).name;
  fuse_horizontally(s);
  mark_final_reads(program, s);
  return s;
}

}  // namespace coil::schedule
