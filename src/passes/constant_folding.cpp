// Constant folding: a call whose tensor inputs are all constants is computed once, at compile
// time, with its eager kernel, and becomes a constant itself.
#include <unordered_set>

#include "passes/pass_util.h"
#include "passes/passes.h"

namespace coil {

namespace {

// Larger results would bloat the graph (and the generated code that embeds its constants)
// more than recomputing them costs.
constexpr int64_t kMaxFoldedElements = int64_t{1} << 16;

bool foldable(const Node& n) {
  if (n.kind() != NodeKind::Call) return false;
  // Factories (full, arange, ...) have no tensor inputs: a kernel generates their values
  // more cheaply than it would load them.
  std::vector<Node*> inputs = n.inputs();
  if (inputs.empty()) return false;
  for (const Node* in : inputs)
    if (in->kind() != NodeKind::Constant) return false;
  if (detail_passes::is_random(n) || detail_passes::has_side_effects(n)) return false;
  for (const TensorMeta& m : n.meta())
    if (m.numel() > kMaxFoldedElements) return false;
  // A folded value is a new storage holding only the node's elements.
  if (detail_passes::reaches_as_strided(&n)) return false;
  // A result that is a constant would hand every caller the graph's own tensor, which the
  // caller may then modify: the last op before a result keeps running, on constants.
  return !detail_passes::reaches_output(&n);
}

}  // namespace

bool run_constant_folding(Graph& g) {
  bool changed = false;
  std::unordered_set<const Node*> erased;  // getitems folded with their call, still in the list
  for (Node* n : g.nodes()) {
    if (erased.count(n) || !foldable(*n)) continue;
    std::vector<Arg> args;
    for (const NodeArg& a : n->args())
      args.push_back(to_arg(a, [](const Node* c) { return c->value(); }));
    std::vector<Tensor> values;
    try {
      values = run_eager(n->op(), args);
    } catch (const Error&) {
      // A call that fails on its constants (an integer division by zero) must fail when the
      // program runs, as it would have without compiling: leave it in the graph.
      continue;
    }
    if (n->is_multi_output()) {
      for (Node* item : std::vector<Node*>(n->users())) {
        Node* c = g.constant(values.at(static_cast<size_t>(item->index())), item);
        erased.insert(item);
        detail_passes::replace_with_new(g, item, c);
      }
      g.erase(n);
    } else {
      detail_passes::replace_with_new(g, n, g.constant(values.at(0), n));
    }
    changed = true;
  }
  return changed;
}

}  // namespace coil
