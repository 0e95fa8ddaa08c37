// Algebraic simplification: cheaper forms of the same computation. Every rule gives the
// correctly rounded value of what it replaces, NaN, infinities and signed zeros included,
// which rules out the tempting ones: x - x -> 0 (NaN - NaN is NaN), x * 0 -> 0 (inf * 0 is
// NaN), x / x -> 1.
#include "passes/pass_util.h"
#include "passes/passes.h"

namespace coil {

namespace {

using detail_passes::uniform_value;

// Whether `x` alone determines `n`'s dtype and sizes (the other operand neither promotes nor
// broadcasts), so that a unary op of `x` can replace `n`.
bool keeps_meta(const Node& n, const Node* x) {
  if (x == nullptr) return false;
  const TensorMeta &a = n.tensor_meta(), &b = x->tensor_meta();
  return a.dtype == b.dtype && a.sizes == b.sizes;
}

// pow(x, e) for the exponents whose correctly rounded result another op computes directly.
Node* simplify_pow(Graph& g, Node* n) {
  Node* x = node_arg(n->args()[0]);
  std::optional<double> e = uniform_value(n->args()[1]);
  if (!e || !keeps_meta(*n, x)) return nullptr;
  bool floating = is_floating(x->tensor_meta().dtype);
  if (*e == 2) return g.call(OpId::mul, {x, x}, n);
  // PyTorch's pow kernel computes x ** 0.5 as sqrt(x), so this is PyTorch's value; std::pow
  // (coil's eager pow today) differs from it at -0.0 (+0.0, not -0.0) and -inf (+inf, not NaN).
  if (*e == 0.5 && floating) return g.call(OpId::sqrt, {x}, n);
  if (*e == -1 && floating) return g.call(OpId::reciprocal, {x}, n);
  return nullptr;
}

// mul(x, -1) or mul(-1, x) -> neg(x): the same bits, integers wrapping alike.
Node* simplify_mul(Graph& g, Node* n) {
  for (int side = 0; side < 2; ++side) {
    Node* x = node_arg(n->args()[side]);
    if (uniform_value(n->args()[1 - side]) == -1 && keeps_meta(*n, x))
      return g.call(OpId::neg, {x}, n);
  }
  return nullptr;
}

// neg(neg(x)) -> x, when x may stand in for the outer neg.
bool remove_double_neg(Graph& g, Node* n) {
  Node* inner = node_arg(n->args()[0]);
  if (inner == nullptr || inner->kind() != NodeKind::Call || inner->op() != OpId::neg) return false;
  Node* x = node_arg(inner->args()[0]);
  return x != nullptr && detail_passes::replace_with_existing(g, n, x);
}

}  // namespace

bool run_algebraic_simplification(Graph& g) {
  bool changed = false;
  for (Node* n : g.nodes()) {
    if (n->kind() != NodeKind::Call) continue;
    Node* fresh = nullptr;
    switch (n->op()) {
      case OpId::pow:
        fresh = simplify_pow(g, n);
        break;
      case OpId::mul:
        fresh = simplify_mul(g, n);
        break;
      case OpId::neg:
        if (remove_double_neg(g, n)) changed = true;
        continue;
      default:
        continue;
    }
    if (fresh == nullptr) continue;
    detail_passes::replace_with_new(g, n, fresh);
    changed = true;
  }
  return changed;
}

}  // namespace coil
