#include "passes/pass_util.h"

#include <functional>

#include "graph/aliasing.h"

namespace coil::detail_passes {

namespace {

bool is_op(const Node& n, OpId op) { return n.kind() == NodeKind::Call && n.op() == op; }

bool is_external_storage(const Node* n) {
  return n->kind() == NodeKind::Placeholder || n->kind() == NodeKind::Parameter ||
         n->kind() == NodeKind::Constant;
}

}  // namespace

bool is_random(const Node& n) {
  if (n.kind() != NodeKind::Call) return false;
  const auto& a = n.args();
  switch (n.op()) {
    case OpId::rand:
    case OpId::randn:
    case OpId::randint:
      return true;
    case OpId::dropout:
      return std::get<bool>(a.at(2)) && std::get<double>(a.at(1)) > 0;
    case OpId::scaled_dot_product_attention:
      return std::get<double>(a.at(4)) > 0;
    default:
      return false;
  }
}

bool has_side_effects(const Node& n) {
  if (!is_op(n, OpId::batch_norm)) return false;
  const auto& a = n.args();
  bool has_stats = node_arg(a.at(3)) != nullptr || node_arg(a.at(4)) != nullptr;
  return has_stats && std::get<bool>(a.at(5));
}

std::optional<double> uniform_value(const NodeArg& a) {
  if (const auto* s = std::get_if<Scalar>(&a)) return s->to_double();
  Node* n = node_arg(a);
  if (n == nullptr || n->kind() != NodeKind::Constant || n->value().numel() == 0)
    return std::nullopt;
  std::vector<double> v = n->value().to_vector_double();
  for (double x : v)
    if (x != v[0]) return std::nullopt;
  return v[0];
}

bool reaches_output(const Node* n) {
  return any_alias_user(n, [](const Node& u) { return u.kind() == NodeKind::Output; });
}

bool reaches_as_strided(const Node* n) {
  return any_alias_user(n, [](const Node& u) { return is_op(u, OpId::as_strided); });
}

bool replace_with_existing(Graph& g, Node* node, Node* existing) {
  const TensorMeta &a = node->tensor_meta(), &b = existing->tensor_meta();
  if (a.dtype != b.dtype || a.sizes != b.sizes || a.strides != b.strides || a.device != b.device)
    return false;
  const Node* root = storage_root(existing);
  if (storage_root(node) != root) {
    if (reaches_as_strided(node)) return false;
    if (is_external_storage(root) && reaches_output(node)) return false;
  }
  g.replace_all_uses_with(node, existing);
  g.erase(node);
  return true;
}

void replace_with_new(Graph& g, Node* node, Node* fresh) {
  g.replace_all_uses_with(node, fresh);
  g.erase(node);
}

}  // namespace coil::detail_passes
