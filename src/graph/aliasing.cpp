#include "graph/aliasing.h"

namespace coil {

namespace {

bool view_like(const Node& call) {
  return op_info(call.op()).kind == OpKind::View || call.op() == OpId::contiguous;
}

}  // namespace

bool aliases_its_input(const Node& n) {
  return n.kind() == NodeKind::GetItem || (n.kind() == NodeKind::Call && view_like(n));
}

const Node* storage_root(const Node* n) {
  for (;;) {
    const Node* call = n->kind() == NodeKind::GetItem ? n->source() : n;
    if (call->kind() != NodeKind::Call || !view_like(*call)) return n;
    Node* in = node_arg(call->args().at(0));
    if (in == nullptr) return n;  // contiguous(2.0): a plain number has no storage to share
    n = in;
  }
}

bool any_alias_user(const Node* n, const std::function<bool(const Node&)>& pred) {
  for (const Node* u : n->users()) {
    if (pred(*u)) return true;
    // (A getitem is one of `n`'s outputs; a view op's storage is its first argument's.)
    const bool alias =
        u->kind() == NodeKind::GetItem || (aliases_its_input(*u) && node_arg(u->args().at(0)) == n);
    if (alias && any_alias_user(u, pred)) return true;
  }
  return false;
}

}  // namespace coil
