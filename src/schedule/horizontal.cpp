// Horizontal fusion into combo kernels (Inductor's combo kernels, torch's foreach ops): a run
// of pointwise kernels with no data dependence between them runs in one parallel region, so a
// step that updates many small tensors (an optimizer's) pays for one fork and join, not one
// per tensor.
#include <set>

#include "schedule/scheduler.h"

namespace coil::schedule {

namespace {

// At most this many loop nests share a region, and at most kMaxUnrelatedFusionNodes statements
// (unless one part alone has more): the generated function stays readable and quick to compile.
constexpr size_t kMaxParts = 64;

bool combinable(const Kernel& k) { return k.parts.empty() && !k.is_reduction(); }

std::set<std::string> stored_by(const Kernel& k) {
  std::set<std::string> out;
  for (const KernelNode& n : k.nodes)
    if (n.store) out.insert(n.buffer);
  return out;
}

// The first buffer `k` reads that `written` holds, or "".
std::string reads_one_of(const Kernel& k, const std::set<std::string>& written) {
  std::string hit;
  for (const KernelNode& n : k.nodes)
    ir::for_each_load(n.body, [&](const ir::ValueNode& l) {
      if (hit.empty() && written.count(l.buffer())) hit = l.buffer();
    });
  return hit;
}

Kernel combine(std::vector<Kernel> parts, int number) {
  Kernel combo;
  for (const Kernel& p : parts)
    for (const std::string& op : p.ops) ir::add_once(combo.ops, op);
  combo.name = fused_name("combo", combo.ops, number);
  sym::Expr points = sym::constant(0);
  for (const Kernel& p : parts) {
    points = points + sym_numel(p.outer);
    combo.nodes.insert(combo.nodes.end(), p.nodes.begin(), p.nodes.end());
  }
  combo.outer = {points};
  combo.parts = std::move(parts);
  return combo;
}

}  // namespace

void fuse_horizontally(Schedule& s) {
  std::vector<Kernel> kernels;
  std::vector<Step> steps;
  std::vector<Kernel> run;        // the pending combo's parts
  std::set<std::string> written;  // what they store
  size_t nodes = 0;               // their statements
  int combos = 0;
  auto flush = [&] {
    if (run.empty()) return;
    if (run.size() > 1) {
      std::string parts;
      for (const Kernel& k : run) parts += (parts.empty() ? "" : ", ") + k.name;
      kernels.push_back(combine(std::move(run), combos++));
      s.decisions.push_back({FusionDecision::Kind::combine, parts, kernels.back().name,
                             "independent pointwise loops, one parallel region"});
    } else {
      kernels.push_back(std::move(run.front()));
    }
    steps.push_back(Step{static_cast<int>(kernels.size()) - 1, ""});
    run.clear();
    written.clear();
    nodes = 0;
  };
  for (const Step& st : s.steps) {
    if (st.kernel < 0) {
      flush();
      steps.push_back(st);
      continue;
    }
    Kernel& k = s.kernels[static_cast<size_t>(st.kernel)];
    if (!combinable(k)) {
      flush();
      run.push_back(std::move(k));
      flush();
      continue;
    }
    if (!run.empty()) {
      std::string dep = reads_one_of(k, written), why;
      if (!dep.empty())
        why = "it reads " + dep + ", which the combo writes";
      else if (run.size() == kMaxParts)
        why = "the combo is full: " + std::to_string(kMaxParts) + " parts";
      else if (nodes + k.nodes.size() > kMaxUnrelatedFusionNodes)
        why = "the combo is full: " + std::to_string(nodes) + " + " +
              std::to_string(k.nodes.size()) + " statements";
      if (!why.empty()) {
        s.decisions.push_back(
            {FusionDecision::Kind::do_not_combine, k.name, run.front().name, why});
        flush();
      }
    }
    for (const std::string& b : stored_by(k)) written.insert(b);
    nodes += k.nodes.size();
    run.push_back(std::move(k));
  }
  flush();
  s.kernels = std::move(kernels);
  s.steps = std::move(steps);
}

}  // namespace coil::schedule
