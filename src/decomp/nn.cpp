// Decompositions of the products (linear, matmul: into mm, addmm, bmm), the losses, attention,
// dropout, stack, and global average pooling.
#include <cmath>
#include <limits>

#include "decomp/decomp_util.h"
#include "heuristics/heuristics.h"

namespace coil::decomp {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

int64_t product(Shape::const_iterator begin, Shape::const_iterator end) {
  int64_t p = 1;
  for (auto it = begin; it != end; ++it) p *= *it;
  return p;
}

// Whether `from` broadcasts to `to` without adding dims to it.
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  for (size_t i = 0, lead = to.size() - from.size(); i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  return true;
}

// The broadcast of two batch shapes (the meta function has checked that they broadcast; a
// symbolic size is never 1).
SymShape broadcast(const SymShape& a, const SymShape& b) {
  SymShape out(std::max(a.size(), b.size()), sym::constant(1));
  for (size_t i = 0; i < a.size(); ++i) out[out.size() - a.size() + i] = a[i];
  for (size_t i = 0; i < b.size(); ++i)
    if (!b[i]->is_const(1)) out[out.size() - b.size() + i] = b[i];
  return out;
}

// t reshaped to `shape` unless it already has it.
Node* reshaped(const Emit& e, Node* t, const SymShape& shape) {
  return sym_sizes(t) == shape ? t : e(OpId::reshape, {t, shape_arg(e.g, shape)});
}

sym::Expr product(SymShape::const_iterator begin, SymShape::const_iterator end) {
  return sym_numel(SymShape(begin, end));
}

// A [..., r, c] operand expanded to `batch` and folded into the [B, r, c] that bmm takes.
Node* as_batch(const Emit& e, Node* t, const SymShape& batch) {
  const SymShape ts = sym_sizes(t);
  const sym::Expr r = ts[ts.size() - 2], c = ts.back();
  SymShape full = batch;
  full.insert(full.end(), {r, c});
  if (ts != full) t = e(OpId::expand, {t, shape_arg(e.g, full)});
  return reshaped(e, t, {product(batch.begin(), batch.end()), r, c});
}

// The class dim of a classification input: [C] has no batch, [N, C, ...] has classes in dim 1.
int64_t class_dim(const Node* x) { return rank(x) == 1 ? 0 : 1; }

// A loss from its per-element terms: the terms, their sum, or their mean, over the targets
// `valid` marks when given (nll's ignore_index), else over all of them.
Node* reduce_loss(const Emit& e, Node* terms, const std::string& reduction, Node* valid) {
  if (reduction == "none") return terms;
  Node* sum = e(OpId::sum, {terms});
  if (reduction == "sum") return sum;
  if (valid) return e(OpId::div, {sum, e(OpId::sum, {valid})});
  const sym::Expr n = sym_numel(sym_sizes(terms));
  if (n->is_const()) return e(OpId::div, {sum, Scalar(n->value())});
  Node* count = e(OpId::full, {Shape{}, size_arg(e.g, n), dtype(sum), meta(sum).device});
  return e(OpId::div, {sum, count});
}

}  // namespace

// linear(x, W, b) = x @ W^T + b as one mm/addmm over x's leading dims folded into rows.
Node* decompose_linear(Graph& g, Node* node) {
  Emit e{g, node};
  Node *x = input(node, 0), *bias = input(node, 2);
  const SymShape xs = sym_sizes(x);
  const sym::Expr rows = product(xs.begin(), xs.end() - 1);
  const Shape mat{product(sizes(x).begin(), sizes(x).end() - 1), sizes(node).back()};
  Node* x2 = reshaped(e, x, {rows, xs.back()});
  Node* wt = e(OpId::t, {input(node, 1)});
  // A bias that does not broadcast to the 2-D product (one with batch dims) is added after.
  const bool fold = bias && broadcasts_to(sizes(bias), mat);
  Node* y =
      reshaped(e, fold ? e(OpId::addmm, {bias, x2, wt}) : e(OpId::mm, {x2, wt}), sym_sizes(node));
  return bias && !fold ? e(OpId::add, {y, bias}) : y;
}

// matmul's rules: a 1-D operand is a row (left) or a column (right) whose dim the result drops;
// a batch against a matrix folds the batch into rows (one mm); batches broadcast, then bmm.
Node* decompose_matmul(Graph& g, Node* node) {
  Emit e{g, node};
  Node *x = input(node, 0), *y = input(node, 1);
  const int64_t rx = rank(x), ry = rank(y);
  Node* a = rx == 1 ? e(OpId::unsqueeze, {x, int64_t{0}}) : x;
  Node* b = ry == 1 ? e(OpId::unsqueeze, {y, int64_t{1}}) : y;
  if (ry <= 2) {
    const SymShape as = sym_sizes(a);
    Node* a2 = reshaped(e, a, {product(as.begin(), as.end() - 1), as.back()});
    return reshaped(e, e(OpId::mm, {a2, b}), sym_sizes(node));
  }
  const SymShape as = sym_sizes(a), bs = sym_sizes(b);
  const SymShape batch =
      broadcast(SymShape(as.begin(), as.end() - 2), SymShape(bs.begin(), bs.end() - 2));
  return reshaped(e, e(OpId::bmm, {as_batch(e, a, batch), as_batch(e, b, batch)}), sym_sizes(node));
}

// dropout: eval mode or p = 0 copies, p = 1 is x * 0 (a NaN stays NaN). Otherwise x times a
// factor, 1 / (1 - p) where a float64 uniform draw is below 1 - p and 0 elsewhere, in float64
// as the eager kernel computes it. The draws are the rand op's: the counter-based generator
// gives the eager kernel's mask (one draw per element in logical order, runtime/random.h).
Node* decompose_dropout(Graph& g, Node* node) {
  const double p = arg<double>(node, 1);
  const bool drops = arg<bool>(node, 2) && p > 0;
  Emit e{g, node};
  Node* x = input(node, 0);
  if (!drops) return e(OpId::clone, {x});
  if (p >= 1) return e(OpId::mul, {x, Scalar(0.0)});
  Node* u = e(OpId::rand, {shape_arg(g, sym_sizes(node)), kFloat64, meta(x).device});
  Node* kept = e.to(e(OpId::lt, {u, Scalar(1 - p)}), kFloat64);
  Node* factor = e(OpId::mul, {kept, Scalar(1 / (1 - p))});
  return e.to(e(OpId::mul, {e.to(x, kFloat64), factor}), dtype(node));
}

// nll_loss(logp, target, reduction, ignore_index): -logp[target] gathered along the class dim,
// 0 where the target is ignore_index; the mean divides by the number of targets not ignored.
Node* decompose_nll_loss(Graph& g, Node* node) {
  Emit e{g, node};
  Node *x = input(node, 0), *target = input(node, 1);
  const int64_t cd = class_dim(x);
  Node* valid = e(OpId::ne, {target, Scalar(arg<int64_t>(node, 3))});
  Node* safe = e(OpId::where, {valid, target, Scalar(int64_t{0})});  // an index gather accepts
  Node* index = e(OpId::unsqueeze, {safe, cd});
  Node* picked = e(OpId::squeeze, {e(OpId::gather, {x, cd, index}), Shape{cd}});
  Node* nll = e(OpId::neg, {e.to(picked, compute_type(dtype(node)))});
  Node* terms = e(OpId::where, {valid, nll, Scalar(0.0)});
  return e.to(reduce_loss(e, terms, arg<std::string>(node, 2), valid), dtype(node));
}

// cross_entropy = nll_loss(log_softmax(x)) for class indices. Label smoothing eps mixes in the
// uniform distribution: (1 - eps) * nll + eps / C * -sum_c logp[c]. Class-probability targets
// (the input's shape) give -sum_c logp[c] * q[c], q smoothed the same way.
Node* decompose_cross_entropy(Graph& g, Node* node) {
  Emit e{g, node};
  Node *x = input(node, 0), *target = input(node, 1);
  const std::string reduction = arg<std::string>(node, 2);
  const int64_t ignore_index = arg<int64_t>(node, 3), cd = class_dim(x);
  const int64_t classes =
      size_value(g, sym_sizes(x)[static_cast<size_t>(cd)], "cross_entropy: label smoothing");
  const double eps = arg<double>(node, 4), uniform = eps / static_cast<double>(classes);
  const DType t = dtype(node), ct = compute_type(t);
  Node* logp = e(OpId::log_softmax, {e.to(x, ct), cd});
  if (sizes(target) == sizes(x)) {
    Node* q = e.to(target, ct);
    if (eps > 0) q = e(OpId::add, {e(OpId::mul, {q, Scalar(1 - eps)}), Scalar(uniform)});
    Node* terms = e(OpId::neg, {e(OpId::sum, {e(OpId::mul, {logp, q}), Shape{cd}})});
    return e.to(reduce_loss(e, terms, reduction, nullptr), t);
  }
  if (eps == 0) return e.to(e(OpId::nll_loss, {logp, target, reduction, ignore_index}), t);
  Node* nll = e(OpId::nll_loss, {logp, target, std::string("none"), ignore_index});
  Node* valid = e(OpId::ne, {target, Scalar(ignore_index)});
  Node* smooth = e(OpId::neg, {e(OpId::sum, {logp, Shape{cd}})});
  Node* terms =
      e(OpId::add, {e(OpId::mul, {nll, Scalar(1 - eps)}),
                    e(OpId::where, {valid, e(OpId::mul, {smooth, Scalar(uniform)}), Scalar(0.0)})});
  return e.to(reduce_loss(e, terms, reduction, valid), t);
}

// mse_loss = (x - target)^2 over the broadcast shape, reduced.
Node* decompose_mse_loss(Graph& g, Node* node) {
  Emit e{g, node};
  const DType t = dtype(node), ct = compute_type(t);
  Node* d = e(OpId::sub, {e.to(input(node, 0), ct), e.to(input(node, 1), ct)});
  Node* sq = e(OpId::mul, {d, d});
  return e.to(reduce_loss(e, sq, arg<std::string>(node, 2), nullptr), t);
}

// scaled_dot_product_attention = softmax(q @ k^T * scale + mask) @ v, where is_causal excludes
// the keys after each query and a bool mask the keys it marks false (their scores -inf; a float
// mask is added; the two never come together), and a row with every key excluded attends to
// nothing (zeros, where softmax would give nan). Dropout multiplies the weights by a keep-mask
// of uniform draws >= p, scaled by 1 / (1 - p): the `rand` op draws the eager kernel's numbers
// (one per weight, in order, in the weights' type). Attention on the CPU with no mask (or a
// causal one) and no dropout declines: its eager kernel runs what this would generate (two
// library products around a vectorised row softmax) as fast, with no code to compile; so does
// a GPU's fused kernel for the head sizes it takes.
Node* decompose_scaled_dot_product_attention(Graph& g, Node* node) {
  const bool causal = arg<bool>(node, 5);
  const double p = arg<double>(node, 4);
  if (!input(node, 3) && p == 0) {
    const int64_t max_head =
        heuristics::for_device(node->tensor_meta().device).fused_attention_max_head();
    // A symbolic head size takes the fused kernel too (compiled per size when called), under a
    // guard that it stays within the kernel's.
    auto fits = [&](const sym::Expr& head) {
      if (max_head == heuristics::kAnyHead) return true;
      ShapeEnv* env = g.shape_env().get();
      const sym::Expr n = env ? env->simplify(head) : head;
      if (n->is_const()) return n->value() > 0 && n->value() <= max_head;
      return env && env->le(n, sym::constant(max_head),
                            "scaled_dot_product_attention: the fused kernel's head sizes");
    };
    if (fits(sym_sizes(input(node, 0)).back()) && fits(sym_sizes(input(node, 2)).back()))
      return nullptr;
  }
  Emit e{g, node};
  const DType t = dtype(node), ct = compute_type(t);
  Node *q = e.to(input(node, 0), ct), *k = e.to(input(node, 1), ct), *v = e.to(input(node, 2), ct);
  Node* mask = input(node, 3);
  std::optional<double> scale = opt_arg<double>(node, 6);
  if (!scale)
    scale = 1 / std::sqrt(static_cast<double>(size_value(
                    g, sym_sizes(q).back(), "scaled_dot_product_attention: 1/sqrt(head size)")));
  Node* kt = e(OpId::transpose, {k, int64_t{-2}, int64_t{-1}});
  Node* scores = e(OpId::mul, {e(OpId::matmul, {q, kt}), Scalar(*scale)});
  if (causal) {
    const SymShape qs = sym_sizes(q), ks = sym_sizes(k);
    Node* ones = e(OpId::full, {shape_arg(g, {qs.end()[-2], ks.end()[-2]}), Scalar(1), kBool,
                                node->tensor_meta().device});
    scores = e(OpId::where, {e(OpId::tril, {ones, int64_t{0}}), scores, Scalar(-kInf)});
  } else if (mask && dtype(mask) == kBool) {
    scores = e(OpId::where, {mask, scores, Scalar(-kInf)});
  } else if (mask) {
    scores = e(OpId::add, {scores, e.to(mask, ct)});
  }
  Node* excluded = e(OpId::all, {e(OpId::eq, {scores, Scalar(-kInf)}), Shape{-1}, true});
  Node* weights = e(OpId::where, {excluded, Scalar(0.0), e(OpId::softmax, {scores, int64_t{-1}})});
  if (p > 0) {
    Node* u = e(OpId::rand, {shape_arg(g, sym_sizes(scores)), ct, node->tensor_meta().device});
    Node* keep = e.to(e(OpId::ge, {u, Scalar(p)}), ct);
    weights = e(OpId::mul, {weights, e(OpId::mul, {keep, Scalar(p < 1 ? 1 / (1 - p) : 0.0)})});
  }
  return e.to(e(OpId::matmul, {weights, v}), t);
}

// stack = cat of the tensors unsqueezed at dim.
Node* decompose_stack(Graph& g, Node* node) {
  Emit e{g, node};
  const int64_t dim = arg<int64_t>(node, 1);
  std::vector<Node*> parts;
  for (Node* t : arg<std::vector<Node*>>(node, 0)) parts.push_back(e(OpId::unsqueeze, {t, dim}));
  return e(OpId::cat, {parts, dim});
}

namespace {

// Whether an adaptive average pool's output of `out` is one element a plane (ResNet's head).
bool global_pool(const SymShape& out) {
  return out.size() >= 3 && out[out.size() - 1]->is_const(1) && out[out.size() - 2]->is_const(1);
}

}  // namespace

// adaptive_avg_pool2d(x, [1, 1]) = the mean over each plane: a reduction, which takes in the
// batch norm, residual and ReLU before it, and reads a channels-last input down its columns.
// Other output sizes keep the op.
Node* decompose_adaptive_avg_pool2d(Graph& g, Node* node) {
  if (!global_pool(sym_sizes(node))) return nullptr;
  return Emit{g, node}(OpId::mean, {input(node, 0), Shape{-2, -1}, true});
}

// Its backward (grad, self): each element of a plane gets the plane's gradient over its size.
Node* decompose_adaptive_avg_pool2d_backward(Graph& g, Node* node) {
  Node *grad = input(node, 0), *self = input(node, 1);
  const SymShape x = sym_sizes(self);
  if (!global_pool(sym_sizes(grad)) || x.size() < 2) return nullptr;
  Emit e{g, node};
  const int64_t plane = size_value(g, x[x.size() - 1] * x[x.size() - 2],
                                   "adaptive_avg_pool2d's gradient divides by the plane's size");
  Node* each = e(OpId::div, {e.to(grad, compute_type(dtype(grad))), Scalar(double(plane))});
  return e.to(e(OpId::expand, {each, shape_arg(g, x)}), dtype(node));
}

}  // namespace coil::decomp
