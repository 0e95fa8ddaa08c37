// Decompositions of the composite reductions (mean, std, logsumexp), softmax, the
// normalisation layers and the composite activations (gelu, silu). 16-bit floats compute in
// float32 and are cast back at the end, as their eager kernels do.
#include <cmath>
#include <limits>
#include <numbers>

#include "decomp/decomp_util.h"

namespace coil::decomp {

namespace {

// 1 / sqrt(var + eps).
Node* rstd(const Emit& e, Node* var, double eps) {
  return e(OpId::rsqrt, {e(OpId::add, {var, Scalar(eps)})});
}

// x * weight + bias, either of them optional.
Node* affine(const Emit& e, Node* x, Node* weight, Node* bias) {
  if (weight) x = e(OpId::mul, {x, weight});
  if (bias) x = e(OpId::add, {x, bias});
  return x;
}

// (x - mean) * rstd over `dims`, the statistics of x itself (biased variance).
Node* standardize(const Emit& e, Node* x, const Shape& dims, double eps) {
  Node* mean = e(OpId::mean, {x, dims, true});
  Node* var = e(OpId::var, {x, dims, 0.0, true});
  return e(OpId::mul, {e(OpId::sub, {x, mean}), rstd(e, var, eps)});
}

// The last n dims, as negative indices.
Shape trailing_dims(size_t n) {
  Shape dims;
  for (auto d = -static_cast<int64_t>(n); d < 0; ++d) dims.push_back(d);
  return dims;
}

// A per-channel tensor of a [N, C, ...] input x (any shape holding C values, as eager accepts)
// as [C, 1, ...], which broadcasts over x, in at least x's precision: the per-channel
// arithmetic on it is exact enough for x's dtype.
Node* per_channel(const Emit& e, Node* p, const Node* x) {
  if (!p) return nullptr;
  Shape shape(static_cast<size_t>(rank(x) - 1), 1);
  shape[0] = sizes(x)[1];
  return e(OpId::reshape, {e.to(p, promote_types(dtype(p), dtype(x))), shape});
}

Node* softmax_of(Graph& g, Node* node, bool log) {
  Emit e{g, node};
  const Shape dim{arg<int64_t>(node, 1)};
  Node* x = e.to(input(node, 0), compute_type(dtype(node)));
  if (reduced_numel(x, dim) == 0) return e.full_like(node, 0);       // nothing to normalise
  Node* shifted = e(OpId::sub, {x, e(OpId::amax, {x, dim, true})});  // keeps exp in range
  Node* ex = e(OpId::exp, {shifted});
  Node* sum = e(OpId::sum, {ex, dim, true});
  Node* y = log ? e(OpId::sub, {shifted, e(OpId::log, {sum})}) : e(OpId::div, {ex, sum});
  return e.to(y, dtype(node));
}

}  // namespace

// mean(x, dim, keepdim) = sum / count, the sum accumulated in the compute type.
Node* decompose_mean(Graph& g, Node* node) {
  Emit e{g, node};
  Node* x = input(node, 0);
  const Shape dims = arg<Shape>(node, 1);
  DType t = dtype(node), ct = compute_type(t);
  std::vector<NodeArg> args{x, dims, arg<bool>(node, 2)};
  if (ct != t) args.push_back(ct);  // sum(dtype=) widens before it adds
  Node* sum = e(OpId::sum, std::move(args));
  // The count: a number, or (over symbols) a 0-dim tensor of its value at run time.
  const SymShape xs = sym_sizes(x);
  sym::Expr count = sym::constant(1);
  for (int64_t d : reduced_dims(dims, rank(x))) count = count * xs[static_cast<size_t>(d)];
  if (count->is_const()) return e.to(e(OpId::div, {sum, Scalar(count->value())}), t);
  Node* n = e(OpId::full, {Shape{}, size_arg(g, count), dtype(sum), meta(sum).device});
  return e.to(e(OpId::div, {sum, n}), t);
}

// std = sqrt(var).
Node* decompose_std(Graph& g, Node* node) {
  Emit e{g, node};
  Node* x = e.to(input(node, 0), compute_type(dtype(node)));
  Node* var = e(OpId::var, {x, arg<Shape>(node, 1), arg<double>(node, 2), arg<bool>(node, 3)});
  return e.to(e(OpId::sqrt, {var}), dtype(node));
}

// logsumexp = log(sum(exp(x - shift))) + shift, shift the maximum. An infinite maximum shifts
// by 0 instead (inf - inf would be nan): rows of -inf then give -inf, rows with inf give inf.
Node* decompose_logsumexp(Graph& g, Node* node) {
  Emit e{g, node};
  const Shape dims = arg<Shape>(node, 1);
  Node* x = e.to(input(node, 0), compute_type(dtype(node)));  // integers compute in float32
  if (reduced_numel(x, dims) == 0)
    return e.full_like(node, -std::numeric_limits<double>::infinity());
  Node* max = e(OpId::amax, {x, dims, true});
  Node* shift = e(OpId::where, {e(OpId::isinf, {max}), Scalar(0.0), max});
  Node* sum = e(OpId::sum, {e(OpId::exp, {e(OpId::sub, {x, shift})}), dims, true});
  Node* y = e(OpId::add, {e(OpId::log, {sum}), shift});
  if (!arg<bool>(node, 2)) y = e(OpId::reshape, {y, shape_arg(g, sym_sizes(node))});
  return e.to(y, dtype(node));
}

Node* decompose_softmax(Graph& g, Node* node) { return softmax_of(g, node, false); }
Node* decompose_log_softmax(Graph& g, Node* node) { return softmax_of(g, node, true); }

// layer_norm(x, normalized_shape, weight?, bias?, eps): standardize over the trailing dims.
Node* decompose_layer_norm(Graph& g, Node* node) {
  Emit e{g, node};
  Node* x = e.to(input(node, 0), compute_type(dtype(node)));
  Node* y = standardize(e, x, trailing_dims(arg<Shape>(node, 1).size()), arg<double>(node, 4));
  return e.to(affine(e, y, input(node, 2), input(node, 3)), dtype(node));
}

// rms_norm(x, normalized_shape, weight?, eps?) = x * rsqrt(mean(x^2) + eps) * weight. The
// default eps is the machine epsilon of the compute type, as in eager.
Node* decompose_rms_norm(Graph& g, Node* node) {
  Emit e{g, node};
  DType t = dtype(node);
  double eps =
      opt_arg<double>(node, 3).value_or(t == kFloat64 ? std::numeric_limits<double>::epsilon()
                                                      : std::numeric_limits<float>::epsilon());
  Node* x = e.to(input(node, 0), compute_type(t));
  Shape dims = trailing_dims(arg<Shape>(node, 1).size());
  Node* ms = e(OpId::mean, {e(OpId::mul, {x, x}), dims, true});
  Node* y = e(OpId::mul, {x, rstd(e, ms, eps)});
  return e.to(affine(e, y, input(node, 2), nullptr), t);
}

// batch_norm(x, weight?, bias?, running_mean?, running_var?, training, momentum, eps). In eval
// mode the running statistics fold into a per-channel scale and shift, one multiply-add per
// element; training without running statistics normalises by the batch's own.
Node* decompose_batch_norm(Graph& g, Node* node) {
  Node *running_mean = input(node, 3), *running_var = input(node, 4);
  const bool training = arg<bool>(node, 5);
  // Training updates the running statistics in place: that side effect stays with the op.
  if (training && (running_mean || running_var)) return nullptr;
  Emit e{g, node};
  const double eps = arg<double>(node, 7);
  Node* x = e.to(input(node, 0), compute_type(dtype(node)));
  Node *weight = per_channel(e, input(node, 1), x), *bias = per_channel(e, input(node, 2), x);
  Node* y;
  if (training) {
    Shape dims = reduced_dims({}, rank(x));
    dims.erase(dims.begin() + 1);  // every dim but the channels
    y = affine(e, standardize(e, x, dims, eps), weight, bias);
  } else {
    Node* scale = affine(e, rstd(e, per_channel(e, running_var, x), eps), weight, nullptr);
    Node* shift = e(OpId::neg, {e(OpId::mul, {per_channel(e, running_mean, x), scale})});
    y = e(OpId::add, {e(OpId::mul, {x, scale}), affine(e, shift, nullptr, bias)});
  }
  return e.to(y, dtype(node));
}

// group_norm(x, groups, weight?, bias?, eps): x [N, C, ...] viewed as [N, groups, rest],
// standardized over the last dim.
Node* decompose_group_norm(Graph& g, Node* node) {
  Emit e{g, node};
  Node* x = e.to(input(node, 0), compute_type(dtype(node)));
  const int64_t groups = arg<int64_t>(node, 1), n = sizes(x)[0];
  int64_t per_group = sizes(x)[1] / groups;
  for (size_t d = 2; d < sizes(x).size(); ++d) per_group *= sizes(x)[d];
  Node* grouped = e(OpId::reshape, {x, Shape{n, groups, per_group}});
  Node* y = e(OpId::reshape,
              {standardize(e, grouped, {-1}, arg<double>(node, 4)), shape_arg(g, sym_sizes(x))});
  y = affine(e, y, per_channel(e, input(node, 2), x), per_channel(e, input(node, 3), x));
  return e.to(y, dtype(node));
}

// gelu = 0.5 * x * (1 + erf(x / sqrt(2))); the tanh variant replaces erf(x / sqrt(2)) with
// tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)).
Node* decompose_gelu(Graph& g, Node* node) {
  Emit e{g, node};
  Node* x = e.to(input(node, 0), compute_type(dtype(node)));  // integers compute in float32
  Node* inner;
  if (arg<std::string>(node, 1) == "tanh") {
    Node* cube = e(OpId::mul, {e(OpId::mul, {x, x}), x});
    Node* poly = e(OpId::add, {x, e(OpId::mul, {cube, Scalar(0.044715)})});
    inner = e(OpId::tanh, {e(OpId::mul, {poly, Scalar(std::sqrt(2 / std::numbers::pi))})});
  } else {
    inner = e(OpId::erf, {e(OpId::mul, {x, Scalar(1 / std::numbers::sqrt2)})});
  }
  Node* half_x = e(OpId::mul, {x, Scalar(0.5)});
  return e.to(e(OpId::mul, {half_x, e(OpId::add, {inner, Scalar(1.0)})}), dtype(node));
}

// silu = x * sigmoid(x).
Node* decompose_silu(Graph& g, Node* node) {
  Emit e{g, node};
  Node* x = e.to(input(node, 0), compute_type(dtype(node)));
  return e.to(e(OpId::mul, {x, e(OpId::sigmoid, {x})}), dtype(node));
}

}  // namespace coil::decomp
