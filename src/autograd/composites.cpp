// Ops that autograd records as their parts (PyTorch's CompositeImplicitAutograd): their
// gradient is the chain rule through those parts, so they need no rule of their own. Each is
// the op's definition written with other coil ops; results match the op's own kernel to
// rounding.
#include <coil/ops.h>

#include <cmath>
#include <limits>

#include "autograd/record.h"
#include "graph/dims.h"
#include "heuristics/heuristics.h"
#include "graph/sym_node.h"

namespace coil::autograd {

namespace {

std::vector<Tensor> one(Tensor t) { return {std::move(t)}; }

// linear(x, w, b) = x @ w^T + b
std::vector<Tensor> linear(const Args& a) {
  Tensor y = matmul(a.tensor(0), a.tensor(1).t());
  Tensor b = a.opt_tensor(2);
  return one(b.defined() ? y + b : y);
}

// dropout(x, p, train): x * mask / (1 - p), the mask drawn as the op's kernel draws it (one
// float64 uniform per element, kept when below 1 - p), so the masks agree with and without
// autograd.
std::vector<Tensor> dropout(const Args& a) {
  const Tensor& x = a.tensor(0);
  const double p = a.f64(1);
  if (p >= 1) return one(x * 0.0);
  Tensor keep = call_op1(OpId::rand, {symints_arg(x.sym_sizes()), kFloat64, x.device()}) < (1 - p);
  return one(x * (keep.to(x.dtype()) * (1 / (1 - p))));
}

// attention(q, k, v, mask, dropout_p, is_causal, scale) = dropout(softmax(q k^T * scale +
// mask)) v, as torch's reference math path: with dropout only (without, the op has a rule of
// its own, derivatives_nn.cpp, and keeps its fused kernel).
std::vector<Tensor> attention(const Args& a) {
  Tensor weights = coil::dropout(attention_weights(a), a.f64(4), true);
  return one(matmul(weights, a.tensor(2)));
}

// group_norm(x, G, w, b, eps): each group of channels normalised over its channels and
// spatial positions, then the per-channel affine.
std::vector<Tensor> group_norm(const Args& a) {
  const Tensor& x = a.tensor(0);
  const int64_t groups = a.i64(1);
  Tensor w = a.opt_tensor(2), b = a.opt_tensor(3);
  Tensor xg = x.reshape_symint({x.sym_size(0), groups, -1});
  Tensor centred = xg - mean(xg, {2}, true);
  Tensor y = (centred * rsqrt(var(xg, {2}, 0, true) + a.f64(4))).reshape_symint(x.sym_sizes());
  Shape param_shape(x.dim(), 1);
  param_shape[1] = x.size(1);
  if (w.defined()) y = y * w.reshape(param_shape);
  if (b.defined()) y = y + b.reshape(param_shape);
  return one(y);
}

// rms_norm(x, shape, w, eps) = x / sqrt(mean(x^2) + eps) * w over the last dims.
std::vector<Tensor> rms_norm(const Args& a) {
  const Tensor& x = a.tensor(0);
  const int64_t k = static_cast<int64_t>(a.ints(1).size());
  Shape dims;
  for (int64_t d = x.dim() - k; d < x.dim(); ++d) dims.push_back(d);
  // PyTorch's default eps is the machine epsilon of the type it computes in.
  const double eps =
      a.opt_f64(3).value_or(x.dtype() == kFloat64 ? std::numeric_limits<double>::epsilon()
                                                  : std::numeric_limits<float>::epsilon());
  Tensor y = x * rsqrt(mean(x * x, dims, true) + eps);
  Tensor w = a.opt_tensor(2);
  return one(w.defined() ? y * w : y);
}

// stack(ts, dim) = cat of each unsqueezed at dim.
std::vector<Tensor> stack(const Args& a) {
  const auto& ts = a.tensors(0);
  COIL_CHECK(!ts.empty(), "stack: expects a non-empty list of tensors");
  const int64_t dim = wrap_dim(a.i64(1), ts[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  for (const Tensor& t : ts) parts.push_back(t.unsqueeze(dim));
  return one(cat(parts, dim));
}

// Self-attention without a mask or dropout where the device's fused backward reads the rows'
// log-sum-exp: the op that keeps it beside the output (its derivative rule passes it on).
bool keeps_stats(const Args& a) {
  if (!a.is_none(3) || a.f64(4) > 0) return false;
  const Tensor &q = a.tensor(0), &k = a.tensor(1), &v = a.tensor(2);
  return q.dim() >= 2 && k.sizes() == q.sizes() && v.sizes() == q.sizes() &&
         k.dtype() == q.dtype() && v.dtype() == q.dtype() &&
         heuristics::for_device(q.device()).attention_keeps_stats(q.dtype(), q.size(-1));
}

std::vector<Tensor> attention_keeping_stats(const Args& a) {
  return one(call_op(OpId::scaled_dot_product_attention_stats,
                     {a.tensor(0), a.tensor(1), a.tensor(2), a.b(5), a[6]})
                 .at(0));
}

}  // namespace

Tensor attention_weights(const Args& a) {
  const Tensor &q = a.tensor(0), &k = a.tensor(1);
  Tensor mask = a.opt_tensor(3);
  const double scale = a.opt_f64(6).value_or(1 / std::sqrt(static_cast<double>(q.size(-1))));
  Tensor scores = matmul(q, k.transpose(-2, -1)) * scale;
  const double inf = std::numeric_limits<double>::infinity();
  if (a.b(5)) {
    Tensor causal = tril(full_symint({q.sym_size(-2), k.sym_size(-2)}, 1, kBool, q.device()));
    scores = where(causal, scores, -inf);
  }
  if (mask.defined()) scores = mask.dtype() == kBool ? where(mask, scores, -inf) : scores + mask;
  return softmax(scores, -1);
}

CompositeFn find_autograd_composite(OpId op, const Args& args) {
  switch (op) {
    case OpId::linear:
      return linear;
    case OpId::dropout:
      return args.b(2) && args.f64(1) > 0 ? dropout : nullptr;
    case OpId::scaled_dot_product_attention:
      return args.f64(4) > 0 ? attention : keeps_stats(args) ? attention_keeping_stats : nullptr;
    case OpId::group_norm:
      return group_norm;
    case OpId::rms_norm:
      return rms_norm;
    case OpId::stack:
      return stack;
    default:
      return nullptr;
  }
}

}  // namespace coil::autograd
