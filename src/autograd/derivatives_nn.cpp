// Derivatives of the neural-network ops: softmaxes, normalisations, products, losses,
// embedding.
#include <coil/autograd.h>
#include <coil/ops.h>

#include <cmath>

#include "autograd/derivatives.h"
#include "graph/sym_node.h"
#include "autograd/record.h"
#include "graph/dims.h"
#include "heuristics/heuristics.h"
#include "runtime/loops.h"

namespace coil::autograd {

namespace {

using C = const GradCtx&;

// sum over `dims`, or `t` itself when there are none (sum's {} would mean every dim).
Tensor sum_over(const Tensor& t, const Shape& dims) { return dims.empty() ? t : sum(t, dims); }

void softmax_rule(C c) {
  const int64_t d = c.args.i64(1);
  const Tensor& y = c.out();
  c.set(0, y * (c.grad() - sum(c.grad() * y, {d}, true)));
}

void log_softmax_rule(C c) {
  const int64_t d = c.args.i64(1);
  c.set(0, c.grad() - exp(c.out()) * sum(c.grad(), {d}, true));
}

// The input gradient of a normalisation y = xhat * w + b over `dims`, xhat = (x - mean) * rstd
// with batch statistics: rstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)).
Tensor normalized_input_grad(const Tensor& gxhat, const Tensor& xhat, const Tensor& rstd,
                             const Shape& dims) {
  return rstd * (gxhat - mean(gxhat, dims, true) - xhat * mean(gxhat * xhat, dims, true));
}

void layer_norm_rule(C c) {
  const Tensor& x = c.in(0);
  const int64_t k = static_cast<int64_t>(c.args.ints(1).size());
  Shape dims, outer;
  for (int64_t d = 0; d < x.dim(); ++d) (d >= x.dim() - k ? dims : outer).push_back(d);
  Tensor rstd = rsqrt(var(x, dims, 0, true) + c.args.f64(4));
  Tensor xhat = (x - mean(x, dims, true)) * rstd;
  const Tensor& g = c.grad();
  if (c.wants(2)) c.set(2, sum_over(g * xhat, outer));
  if (c.wants(3)) c.set(3, sum_over(g, outer));
  if (!c.wants(0)) return;
  Tensor w = c.args.opt_tensor(2);
  c.set(0, normalized_input_grad(w.defined() ? g * w : g, xhat, rstd, dims));
}

void batch_norm_rule(C c) {
  const Tensor& x = c.in(0);
  Tensor w = c.args.opt_tensor(1), running_mean = c.args.opt_tensor(3),
         running_var = c.args.opt_tensor(4);
  const bool batch_stats = c.args.b(5) || !running_mean.defined();
  const double eps = c.args.f64(7);
  Shape dims, param_shape(x.dim(), 1);
  param_shape[1] = x.size(1);
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != 1) dims.push_back(d);
  Tensor rstd = batch_stats ? rsqrt(var(x, dims, 0, true) + eps)
                            : rsqrt(running_var + eps).reshape(param_shape);
  Tensor centre = batch_stats ? mean(x, dims, true) : running_mean.reshape(param_shape);
  Tensor xhat = (x - centre) * rstd;
  const Tensor& g = c.grad();
  if (c.wants(1)) c.set(1, sum(g * xhat, dims));
  if (c.wants(2)) c.set(2, sum(g, dims));
  if (!c.wants(0)) return;
  Tensor gxhat = w.defined() ? g * w.reshape(param_shape) : g;
  c.set(0, batch_stats ? normalized_input_grad(gxhat, xhat, rstd, dims) : gxhat * rstd);
}

// Whether a matrix is the transpose of a contiguous one (a linear layer's `w.t()`).
bool is_column_major(const Tensor& m) {
  return m.dim() == 2 && m.size(0) > 1 && m.size(1) > 1 && !m.is_contiguous() &&
         m.t().is_contiguous();
}

// The product a @ b, the gradient of an operand laid out like `like`: where that operand is a
// transposed contiguous matrix (the weight of a linear layer), the product is made transposed,
// (b^T a^T)^T, so that the gradient of the contiguous weight comes out contiguous — as
// PyTorch's mm_mat2_backward does. Otherwise it would be a transposed view, and accumulating it
// into the weight's .grad, or an optimizer reading it beside the weight, would copy it.
Tensor product_grad(const Tensor& a, const Tensor& b, const Tensor& like) {
  return is_column_major(like) ? mm(b.t(), a.t()).t() : mm(a, b);
}

void mm_rule(C c) {
  if (c.wants(0)) c.set(0, product_grad(c.grad(), c.in(1).t(), c.in(0)));
  if (c.wants(1)) c.set(1, product_grad(c.in(0).t(), c.grad(), c.in(1)));
}

void bmm_rule(C c) {
  if (c.wants(0)) c.set(0, bmm(c.grad(), c.in(1).transpose(1, 2)));
  if (c.wants(1)) c.set(1, bmm(c.in(0).transpose(1, 2), c.grad()));
}

void addmm_grads(C c, const Tensor& g) {
  c.set(0, g);
  if (c.wants(1)) c.set(1, product_grad(g, c.in(2).t(), c.in(1)));
  if (c.wants(2)) c.set(2, product_grad(c.in(1).t(), g, c.in(2)));
}

// matmul with numpy's rules: 1-D operands gain a dim (then lose it), batch dims broadcast.
void matmul_rule(C c) {
  const Tensor &a = c.in(0), &b = c.in(1);
  Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  Tensor g = c.grad();
  if (a.dim() == 1) g = g.unsqueeze(g.dim() == 0 ? 0 : -2);
  if (b.dim() == 1) g = g.unsqueeze(-1);
  if (c.wants(0))
    c.set(0, sum_to(matmul(g, b2.transpose(-1, -2)), a2.sym_sizes()).reshape_symint(a.sym_sizes()));
  if (!c.wants(1)) return;
  if (b2.dim() == 2) {
    // A batch against a matrix: the batch folds into the rows of one product, as the forward
    // does, instead of a product per batch element summed afterwards.
    const bool batch = a2.dim() > 2;
    const Tensor rows = batch ? a2.reshape({-1, a2.size(-1)}) : a2;
    Tensor grad = product_grad(rows.t(), batch ? g.reshape({-1, g.size(-1)}) : g, b2);
    c.set(1, b.dim() == 2 ? grad : grad.reshape_symint(b.sym_sizes()));
    return;
  }
  c.set(1, sum_to(matmul(a2.transpose(-1, -2), g), b2.sym_sizes()).reshape_symint(b.sym_sizes()));
}

void mse_loss_rule(C c) {
  const Tensor &x = c.in(0), &t = c.in(1);
  const std::string& reduction = c.args.str(2);
  Tensor g = c.grad().expand(broadcast_shapes(x.sizes(), t.sizes(), "mse_loss"));
  if (reduction == "mean") g = g / static_cast<double>(std::max<int64_t>(g.numel(), 1));
  Tensor d = (x - t) * g * 2;
  if (c.wants(0)) c.set(0, d);
  if (c.wants(1)) c.set(1, -d);
}

// The class dim of a classification input: [C] has none before it, [N, C, ...] has it at 1.
int64_t class_dim(const Tensor& x) { return x.dim() == 1 ? 0 : 1; }

// The per-element weight of the loss's gradient: g itself ("none"), or g broadcast ("sum"),
// divided by the count that "mean" divides by.
Tensor loss_scale(const Tensor& g, const std::string& reduction, const Tensor& count) {
  if (reduction == "none") return g;
  return reduction == "mean" ? g / count : g;
}

// Cross entropy and nll loss with class-index targets: the target's one-hot row (smoothed) at
// each position that is not ignore_index.
struct IndexTargets {
  Tensor valid;   // target != ignore_index, shaped as the input with the class dim kept (1)
  Tensor onehot;  // one at the target class, as the input
  Tensor count;   // how many targets are valid (what "mean" divides by)
};
IndexTargets index_targets(const Tensor& x, const Tensor& target, int64_t ignore_index) {
  const int64_t cd = class_dim(x);
  IndexTargets r;
  Tensor valid = target != ignore_index;
  Tensor index = where(valid, target, 0).unsqueeze(cd);
  r.valid = valid.unsqueeze(cd).to(x.dtype());
  r.onehot = scatter_add(zeros_like(x), cd, index, ones_like(index).to(x.dtype()));
  r.count = sum(r.valid);
  return r;
}

void nll_loss_rule(C c) {
  if (!c.wants(0)) return;
  const Tensor& x = c.in(0);
  IndexTargets t = index_targets(x, c.in(1), c.args.i64(3));
  const std::string& reduction = c.args.str(2);
  Tensor g = reduction == "none" ? c.grad().unsqueeze(class_dim(x)) : c.grad();
  c.set(0, -t.onehot * t.valid * loss_scale(g, reduction, t.count));
}

void cross_entropy_rule(C c) {
  const Tensor &x = c.in(0), &target = c.in(1);
  const std::string& reduction = c.args.str(2);
  const double eps = c.args.f64(4);
  const int64_t cd = class_dim(x);
  const double classes = static_cast<double>(x.size(cd));
  Tensor sm = softmax(x, cd);
  Tensor g = reduction == "none" ? c.grad().unsqueeze(cd) : c.grad();
  if (target.is_floating_point() && target.dim() == x.dim()) {  // class probabilities
    Tensor q = target.to(x.dtype()) * (1 - eps) + eps / classes;
    Tensor n = scalar_tensor(static_cast<double>(x.numel()) / classes, x.dtype(), x.device());
    Tensor scale = loss_scale(g, reduction, n);
    if (c.wants(0)) c.set(0, (sm * sum(q, {cd}, true) - q) * scale);
    if (c.wants(1)) c.set(1, log_softmax(x, cd) * scale * (eps - 1));
    return;
  }
  if (!c.wants(0)) return;
  IndexTargets t = index_targets(x, target, c.args.i64(3));
  Tensor q = t.onehot * (1 - eps) + eps / classes;
  c.set(0, (sm - q) * t.valid * loss_scale(g, reduction, t.count));
}

void embedding_rule(C c) {
  if (!c.wants(0)) return;
  const Tensor &weight = c.in(0), &indices = c.in(1);
  const SymInt dim = weight.sym_size(1);
  const int64_t padding_idx = c.args.i64(2);
  Tensor index = indices.reshape({-1, 1});
  Tensor g = c.grad().reshape_symint({-1, dim});
  if (padding_idx >= 0) g = where(index != padding_idx, g, 0.0);
  Tensor idx = index.expand_symint({index.sym_size(0), dim});
  c.set(0, scatter_add(zeros_like(weight), 0, idx, g.to(weight.dtype())));
}

// The weights' math of attention's backward, recorded op by op (the CPU's and the GPU's
// kernels take the rest): p made again from q and k (`sdpa` holds scaled_dot_product_attention's
// arguments), dv = p^T g, ds = p * (dp - rowsum(dp * p)) with dp = g v^T (softmax's backward),
// dq = ds k and dk = ds^T q, each times the scale; a float mask's gradient is ds. Where the
// rows' log-sum-exp has a gradient `lse_grad` too, each score's share of it is its weight.
void attention_math(C c, const Args& sdpa, double scale, const Tensor& lse_grad = Tensor()) {
  const Tensor &q = c.in(0), &k = c.in(1), &v = c.in(2), &g = c.grad();
  Tensor p = attention_weights(sdpa);
  if (c.wants(2)) c.set(2, matmul(p.transpose(-2, -1), g));
  Tensor dp = matmul(g, v.transpose(-2, -1));
  Tensor ds = dp - sum(dp * p, {-1}, true);
  if (lse_grad.defined()) ds = ds + lse_grad.to(ds.dtype()).unsqueeze(-1);
  ds = p * ds;
  if (c.wants(0)) c.set(0, matmul(ds, k) * scale);
  if (c.wants(1)) c.set(1, matmul(ds.transpose(-2, -1), q) * scale);
  if (c.wants(3)) c.set(3, ds);
}

// The op that computes all three gradients in the backend's fused kernels, without the p and
// dp tensors, from the forward's log-sum-exp where it kept it (`stats`, else None).
void fused_attention_grads(C c, bool causal, const Arg& scale, const Arg& stats) {
  const Tensor &q = c.in(0), &k = c.in(1), &v = c.in(2);
  Tensor grads = call_op1(OpId::scaled_dot_product_attention_backward,
                          {c.grad(), q, k, v, c.out(), causal, scale, stats});
  for (size_t i = 0; i < 3; ++i)
    if (c.wants(i)) c.set(i, grads.select(0, static_cast<int64_t>(i)));
}

// scaled_dot_product_attention without dropout, as flash attention's backward: the weights are
// recomputed (no sequence x sequence tensor is kept from the forward). Self-attention without a
// mask (q, k, v of one shape; the devices, dtypes and heads the device heuristics fuse) takes
// the fused op, unless the backward is itself differentiated (create_graph records the math).
void attention_rule(C c) {
  const Tensor &q = c.in(0), &k = c.in(1), &v = c.in(2);
  const double scale = c.args.opt_f64(6).value_or(1 / std::sqrt(static_cast<double>(q.size(-1))));
  if (!grad_mode_enabled() && c.args.is_none(3) && q.dim() >= 2 &&
      heuristics::for_device(q.device()).fused_attention_backward(q.dtype(), q.size(-1)) &&
      k.sizes() == q.sizes() && v.sizes() == q.sizes() && k.dtype() == q.dtype() &&
      v.dtype() == q.dtype())
    return fused_attention_grads(c, c.args.b(5), c.args[6], Arg());
  attention_math(c, c.args, scale);
}

// scaled_dot_product_attention_stats: the fused op from the kept log-sum-exp, unless the
// backward is differentiated or a gradient flows into the log-sum-exp itself (then the math).
void attention_stats_rule(C c) {
  const Tensor& q = c.in(0);
  if (!grad_mode_enabled() && !c.flowed[1])
    return fused_attention_grads(c, c.args.b(3), c.args[4], c.out(1));
  const std::vector<Arg> sdpa = {q, c.in(1), c.in(2), Arg(), 0.0, c.args.b(3), c.args[4]};
  attention_math(c, Args(sdpa),
                 c.args.opt_f64(4).value_or(1 / std::sqrt(static_cast<double>(q.size(-1)))),
                 c.flowed[1] ? c.grads[1] : Tensor());
}

}  // namespace

std::vector<RuleEntry> nn_rules() {
  return {
      {OpId::softmax, softmax_rule},
      {OpId::log_softmax, log_softmax_rule},
      {OpId::layer_norm, layer_norm_rule},
      {OpId::batch_norm, batch_norm_rule},
      {OpId::mm, mm_rule},
      {OpId::bmm, bmm_rule},
      {OpId::addmm, [](C c) { addmm_grads(c, c.grad()); }},
      {OpId::addmm_relu, [](C c) { addmm_grads(c, where(c.out() > 0, c.grad(), 0.0)); }},
      {OpId::matmul, matmul_rule},
      {OpId::mse_loss, mse_loss_rule},
      {OpId::nll_loss, nll_loss_rule},
      {OpId::cross_entropy, cross_entropy_rule},
      {OpId::embedding, embedding_rule},
      {OpId::scaled_dot_product_attention, attention_rule},
      {OpId::scaled_dot_product_attention_stats, attention_stats_rule},
      // Dropout in training mode records its parts (autograd/composites.cpp); otherwise it is
      // the identity.
      {OpId::dropout, [](C c) { c.set(0, c.grad()); }},
  };
}

}  // namespace coil::autograd
