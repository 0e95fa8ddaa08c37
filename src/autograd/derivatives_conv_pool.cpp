// The derivatives of conv2d and the pools. conv2d's is written with conv2d itself: the weight's
// gradient is a correlation of the input with the output's gradient (channels taking the
// batch's place), the input's a transposed convolution (the gradient spread out by the stride,
// convolved with the flipped kernel). The pools scatter the gradient back through their
// windows with ops of their own (max_pool2d_backward, ...: src/ops/pool.cpp), which have rules
// too, for second derivatives.
#include <coil/ops.h>

#include <map>

#include "autograd/derivatives.h"

namespace coil::autograd {

namespace {

using C = const GradCtx&;

// `t` with stride - 1 zeros inserted between its elements along `dim`.
Tensor dilate(const Tensor& t, int64_t dim, int64_t stride) {
  if (stride == 1) return t;
  const int64_t n = t.size(dim);
  Tensor u = t.unsqueeze(dim + 1);
  Shape pads(2 * static_cast<size_t>(u.dim()), 0);
  pads[2 * static_cast<size_t>(u.dim() - 1 - (dim + 1)) + 1] = stride - 1;
  Shape merged = t.sizes();
  merged[dim] = n * stride;
  return pad(u, pads).reshape(merged).narrow(dim, 0, (n - 1) * stride + 1);
}

// d x for g [N, O, Ho, Wo], w [O, C, kh, kw], x of sizes [N, C, H, W].
Tensor input_grad(const Tensor& g, const Tensor& w, const Shape& x_sizes, const Shape& stride,
                  const Shape& padding, const Shape& dilation) {
  Tensor spread = dilate(dilate(g, 2, stride[0]), 3, stride[1]);
  Shape pads(4, 0);  // (left, right) of W, then of H
  for (size_t i = 0; i < 2; ++i) {
    const int64_t k = w.size(2 + static_cast<int64_t>(i));
    const int64_t full = dilation[i] * (k - 1) - padding[i];
    const int64_t natural =
        spread.size(2 + static_cast<int64_t>(i)) + dilation[i] * (k - 1) - 2 * padding[i];
    const size_t pair = 2 * (1 - i);
    pads[pair] = full;
    pads[pair + 1] = full + x_sizes[2 + i] - natural;  // rows no window reached get zeros
  }
  return conv2d(pad(spread, pads), flip(w, {2, 3}).transpose(0, 1), {}, {1, 1}, {0, 0}, dilation,
                1);
}

// d w for g [N, O, Ho, Wo], x [N, C, H, W], w of sizes [O, C, kh, kw].
Tensor weight_grad(const Tensor& g, const Tensor& x, const Shape& w_sizes, const Shape& stride,
                   const Shape& padding, const Shape& dilation) {
  Tensor r = conv2d(x.transpose(0, 1), g.transpose(0, 1), {}, dilation, padding, stride, 1);
  return r.narrow(2, 0, w_sizes[2]).narrow(3, 0, w_sizes[3]).transpose(0, 1);
}

void conv2d_rule(C c) {
  const bool unbatched = c.in(0).dim() == 3;
  Tensor x = unbatched ? c.in(0).unsqueeze(0) : c.in(0);
  Tensor g = unbatched ? c.grad().unsqueeze(0) : c.grad();
  const Tensor& w = c.in(1);
  const Shape &stride = c.args.ints(3), &padding = c.args.ints(4), &dilation = c.args.ints(5);
  const int64_t groups = c.args.i64(6);
  if (c.wants(2)) c.set(2, sum(g, {0, 2, 3}));
  // Groups are independent convolutions over slices of the channels.
  const int64_t in_per_group = x.size(1) / groups, out_per_group = w.size(0) / groups;
  std::vector<Tensor> gx, gw;
  for (int64_t k = 0; k < groups; ++k) {
    Tensor xk = groups == 1 ? x : x.narrow(1, k * in_per_group, in_per_group);
    Tensor wk = groups == 1 ? w : w.narrow(0, k * out_per_group, out_per_group);
    Tensor gk = groups == 1 ? g : g.narrow(1, k * out_per_group, out_per_group);
    if (c.wants(0)) gx.push_back(input_grad(gk, wk, xk.sizes(), stride, padding, dilation));
    if (c.wants(1)) gw.push_back(weight_grad(gk, xk, wk.sizes(), stride, padding, dilation));
  }
  if (c.wants(0)) {
    Tensor r = groups == 1 ? gx[0] : cat(gx, 1);
    c.set(0, unbatched ? r.squeeze(0) : r);
  }
  if (c.wants(1)) c.set(1, groups == 1 ? gw[0] : cat(gw, 0));
}

// A pool's input gradient: its backward op on (grad, input, the pool's other arguments).
void pool_rule(C c) {
  if (!c.wants(0)) return;
  static const std::map<OpId, OpId> backward = {
      {OpId::max_pool2d, OpId::max_pool2d_backward},
      {OpId::avg_pool2d, OpId::avg_pool2d_backward},
      {OpId::adaptive_avg_pool2d, OpId::adaptive_avg_pool2d_backward}};
  std::vector<Arg> args{c.grad(), c.in(0)};
  // adaptive_avg_pool2d's output size is the gradient's; the others pass their window options.
  if (c.op != OpId::adaptive_avg_pool2d)
    for (size_t i = 1; i < c.args.size(); ++i) args.push_back(c.args[i]);
  c.set(0, call_op1(backward.at(c.op), std::move(args)));
}

// The pools' backward ops, for second derivatives. Each is linear in its gradient argument
// (0) and piecewise constant in the pool's input (1), whose gradient is zero (almost everywhere
// for max pooling: the argmax moves only at ties). The gradient of the gradient argument is the
// op's adjoint: the forward pool for the averages; for max pooling the element at each window's
// argmax (max_pool2d_double_backward), whose own adjoint is max_pool2d_backward again.
void pool_backward_rule(C c) {
  if (c.wants(1)) c.set(1, zeros_like(c.args.tensor(1)));  // only the sizes are read
  if (!c.wants(0)) return;
  const Tensor& g = c.grad();
  // The same window options after (gradient, self), or after the pooled tensor alone.
  auto with_options = [&](std::vector<Arg> args) {
    for (size_t i = 2; i < c.args.size(); ++i) args.push_back(c.args[i]);
    return args;
  };
  switch (c.op) {
    case OpId::max_pool2d_backward:
      c.set(0, call_op1(OpId::max_pool2d_double_backward, with_options({g, c.in(1)})));
      return;
    case OpId::max_pool2d_double_backward:
      c.set(0, call_op1(OpId::max_pool2d_backward, with_options({g, c.in(1)})));
      return;
    case OpId::avg_pool2d_backward:
      c.set(0, call_op1(OpId::avg_pool2d, with_options({g})));
      return;
    case OpId::adaptive_avg_pool2d_backward: {
      const Tensor& grad_output = c.args.tensor(0);  // only its sizes are read
      c.set(0, adaptive_avg_pool2d(g, {grad_output.size(-2), grad_output.size(-1)}));
      return;
    }
    default:
      COIL_ASSERT(false, "pool_backward_rule: unexpected op ", op_name(c.op));
  }
}

}  // namespace

std::vector<RuleEntry> conv_pool_rules() {
  return {{OpId::conv2d, conv2d_rule},
          {OpId::max_pool2d, pool_rule},
          {OpId::avg_pool2d, pool_rule},
          {OpId::adaptive_avg_pool2d, pool_rule},
          {OpId::max_pool2d_backward, pool_backward_rule},
          {OpId::avg_pool2d_backward, pool_backward_rule},
          {OpId::adaptive_avg_pool2d_backward, pool_backward_rule},
          {OpId::max_pool2d_double_backward, pool_backward_rule}};
}

}  // namespace coil::autograd
