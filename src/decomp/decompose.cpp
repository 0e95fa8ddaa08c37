// The decomposition table and the driver that applies it until nothing changes.
#include <array>

#include "decomp/decomp_util.h"
#include "graph/printer.h"

namespace coil {

namespace {

using Table = std::array<Decomposition, kNumOps>;

const Table& table() {
  static const Table t = [] {
    Table t{};
#define COIL_TABLE_ENTRY(op) t[static_cast<size_t>(OpId::op)] = decomp::decompose_##op;
    COIL_DECOMPOSITIONS(COIL_TABLE_ENTRY)
#undef COIL_TABLE_ENTRY
    return t;
  }();
  return t;
}

}  // namespace

const Decomposition* find_decomposition(OpId op) {
  const Decomposition& d = table()[static_cast<size_t>(op)];
  return d ? &d : nullptr;
}

bool decompose(Graph& g) {
  bool changed = false;
  // A pass visits the nodes present when it starts; the nodes a decomposition emits (which may
  // be composite themselves) wait for the next pass. Declined nodes stay, so a pass that
  // rewrites nothing is the last.
  for (bool again = true; again;) {
    again = false;
    for (Node* n : g.nodes()) {
      if (n->kind() != NodeKind::Call) continue;
      const Decomposition* d = find_decomposition(n->op());
      if (!d) continue;
      Node* replacement = nullptr;
      try {
        replacement = (*d)(g, n);
      } catch (const Error& e) {  // the node was valid, so the decomposition is wrong
        COIL_ASSERT(false, "decomposing ", print_node(*n), ": ", e.what());
      }
      if (!replacement) continue;
      g.replace_all_uses_with(n, replacement);
      g.erase(n);
      again = changed = true;
    }
  }
  return changed;
}

std::vector<OpId> decomposed_ops() {
  std::vector<OpId> ops;
  for (int i = 0; i < kNumOps; ++i)
    if (table()[static_cast<size_t>(i)]) ops.push_back(static_cast<OpId>(i));
  return ops;
}

}  // namespace coil

namespace coil::decomp {

int64_t size_value(const Graph& g, sym::Expr n, const std::string& reason) {
  if (n->is_const()) return n->value();
  return g.shape_env()->guard_int(n, reason);
}

}  // namespace coil::decomp
