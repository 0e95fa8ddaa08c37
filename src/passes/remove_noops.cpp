// No-op removal: calls that return their input's values unchanged are replaced by the input.
// Whether the input may really stand in for the call (same dtype, sizes and strides, no graph
// result that starts to alias an input) is replace_with_existing's decision; this file only
// says which calls leave their input unchanged.
#include "passes/pass_util.h"
#include "passes/passes.h"

namespace coil {

namespace {

using detail_passes::uniform_value;

bool is(const NodeArg& a, double v) { return uniform_value(a) == v; }

// The input `n` returns unchanged, or nullptr. Binary ops name their identity element on
// either side where they commute; a broadcast or a promotion by the other operand is caught
// by the meta comparison afterwards.
Node* unchanged_input(const Node& n) {
  const std::vector<NodeArg>& a = n.args();
  switch (n.op()) {
    case OpId::add:
      // x + 0 turns -0.0 into +0.0 (x + -0.0 is exact); this rule accepts that difference:
      // the two compare equal, and only ops such as 1/x and atan2 tell them apart.
      if (is(a[1], 0)) return node_arg(a[0]);
      if (is(a[0], 0)) return node_arg(a[1]);
      return nullptr;
    case OpId::sub:
      return is(a[1], 0) ? node_arg(a[0]) : nullptr;
    case OpId::mul:
      if (is(a[1], 1)) return node_arg(a[0]);
      if (is(a[0], 1)) return node_arg(a[1]);
      return nullptr;
    case OpId::div:  // true division only: x / 1 with a rounding mode rounds x
      return std::holds_alternative<std::monostate>(a[2]) && is(a[1], 1) ? node_arg(a[0]) : nullptr;
    case OpId::pow:
      return is(a[1], 1) ? node_arg(a[0]) : nullptr;
    case OpId::to_dtype:  // the dtype check in replace_with_existing keeps real casts
    case OpId::clone:
    case OpId::contiguous:
      return node_arg(a[0]);
    default:
      break;
  }
  // A view with its input's exact geometry (view or expand to the same sizes, the identity
  // permute, a full-range slice, squeeze of no unit dim) reads the same elements.
  if (op_info(n.op()).kind != OpKind::View || n.is_multi_output()) return nullptr;
  Node* in = node_arg(a[0]);
  return in && in->tensor_meta() == n.tensor_meta() ? in : nullptr;
}

}  // namespace

bool run_remove_noops(Graph& g) {
  bool changed = false;
  for (Node* n : g.nodes()) {
    if (n->kind() != NodeKind::Call || n->is_multi_output()) continue;
    Node* in = unchanged_input(*n);
    if (in != nullptr && detail_passes::replace_with_existing(g, n, in)) changed = true;
  }
  return changed;
}

}  // namespace coil
