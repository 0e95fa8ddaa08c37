// Private to src/decomp: the list of decompositions, and the few helpers they are written
// with (reading a call's normalized arguments, emitting nodes in front of it).
#pragma once

#include <optional>
#include <string>

#include "decomp/decompose.h"
#include "graph/sym_node.h"

namespace coil::decomp {

// Every decomposition, by op name: decompose_<op> lives in the family file.
// clang-format off
#define COIL_DECOMPOSITIONS(X)                                                         \
  X(mean) X(std) X(logsumexp) X(softmax) X(log_softmax)                                \
  X(layer_norm) X(rms_norm) X(batch_norm) X(group_norm) X(gelu) X(silu)                \
  X(linear) X(matmul) X(dropout) X(cross_entropy) X(nll_loss) X(mse_loss)              \
  X(scaled_dot_product_attention) X(stack)                                             \
  X(adaptive_avg_pool2d) X(adaptive_avg_pool2d_backward)
// clang-format on

#define COIL_DECLARE_DECOMPOSITION(op) Node* decompose_##op(Graph& g, Node* node);
COIL_DECOMPOSITIONS(COIL_DECLARE_DECOMPOSITION)
#undef COIL_DECLARE_DECOMPOSITION

// Argument i of a call, as its schema types it (the graph keeps arguments normalized, so a
// mismatch is a coil bug).
template <typename T>
T arg(const Node* n, size_t i) {
  const T* v = std::get_if<T>(&n->args().at(i));
  COIL_ASSERT(v, op_name(n->op()), ": argument ", i, " does not hold the schema's type");
  return *v;
}
template <typename T>
std::optional<T> opt_arg(const Node* n, size_t i) {
  if (std::holds_alternative<std::monostate>(n->args().at(i))) return std::nullopt;
  return arg<T>(n, i);
}
// A Tensor or Tensor? argument: its node, nullptr for None.
inline Node* input(const Node* n, size_t i) { return opt_arg<Node*>(n, i).value_or(nullptr); }

inline const TensorMeta& meta(const Node* n) { return n->tensor_meta(); }
inline DType dtype(const Node* n) { return meta(n).dtype; }
inline const Shape& sizes(const Node* n) { return meta(n).sizes; }
inline int64_t rank(const Node* n) { return static_cast<int64_t>(sizes(n).size()); }
inline int64_t numel(const Node* n) { return meta(n).numel(); }
// Sizes over a dynamic graph's symbols (numbers in a static one): what the shapes a
// decomposition emits are computed from, so that its nodes keep the symbols.
inline SymShape sym_sizes(const Node* n) { return n->sym_layout().sizes; }
// A size used as a plain number (a scale computed from it): its value, and in a dynamic graph
// a guard that fixes it (a decomposition must never bake a hint in silently).
int64_t size_value(const Graph& g, sym::Expr n, const std::string& reason);

// The dtype arithmetic happens in: float32 for float16/bfloat16, as the eager kernels do.
inline DType compute_type(DType t) { return is_reduced_float(t) ? kFloat32 : t; }

// Emits calls in front of the node being decomposed, so they come before all its users.
struct Emit {
  Graph& g;
  Node* at;
  Node* operator()(OpId op, std::vector<NodeArg> args) const {
    return g.call(op, std::move(args), at);
  }
  // x as dtype t (x itself when it already is).
  Node* to(Node* x, DType t) const { return dtype(x) == t ? x : (*this)(OpId::to_dtype, {x, t}); }
  // A tensor of `like`'s sizes, dtype and device filled with `value`.
  Node* full_like(const Node* like, Scalar value) const {
    return (*this)(OpId::full,
                   {shape_arg(g, sym_sizes(like)), value, dtype(like), meta(like).device});
  }
};

// The dims a reduction over `dims` ([] means all) of a tensor of `rank` dims covers, wrapped.
inline Shape reduced_dims(const Shape& dims, int64_t rank) {
  Shape out;
  if (dims.empty()) {
    for (int64_t d = 0; d < rank; ++d) out.push_back(d);
  } else if (rank > 0) {  // a 0-dim tensor has no dim to name: dim 0 is the element itself
    for (int64_t d : dims) out.push_back(d < 0 ? d + rank : d);
  }
  return out;
}
// How many elements of x each output of that reduction folds.
inline int64_t reduced_numel(const Node* x, const Shape& dims) {
  int64_t n = 1;
  for (int64_t d : reduced_dims(dims, rank(x))) n *= sizes(x)[d];
  return n;
}

}  // namespace coil::decomp
