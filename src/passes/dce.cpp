// Dead code elimination: a node nobody reads is dropped, which may leave its inputs unread in
// turn, so the walk goes backwards from the output.
#include "passes/pass_util.h"
#include "passes/passes.h"

namespace coil {

namespace {

bool removable(const Node& n) {
  switch (n.kind()) {
    case NodeKind::Call:
      // An unused random call goes too, though later draws then get the numbers it would
      // have drawn: no program can rely on which numbers a draw gets.
      return !detail_passes::has_side_effects(n);
    case NodeKind::GetItem:
    case NodeKind::Constant:
    case NodeKind::Parameter:
      return true;
    case NodeKind::Placeholder:  // the graph's signature: callers pass every input
    case NodeKind::Output:
      return false;
  }
  return false;
}

}  // namespace

bool run_dce(Graph& g) {
  // Without an output node nothing is known to be needed: the graph is still being built.
  if (g.output_node() == nullptr) return false;
  bool changed = false;
  std::vector<Node*> nodes = g.nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    Node* n = *it;
    if (!n->users().empty() || !removable(*n)) continue;
    g.erase(n);
    changed = true;
  }
  return changed;
}

}  // namespace coil
