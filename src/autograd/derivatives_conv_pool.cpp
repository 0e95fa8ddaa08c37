// The derivatives of conv2d and the pools. conv2d's gradients are ops of their own
// (conv2d_input_backward, conv2d_weight_backward: src/ops/conv.cpp, cuDNN's on the GPU), whose
// rules are written with conv2d and each other, for second derivatives. The pools scatter the
// gradient back through their windows with ops of their own (max_pool2d_backward, ...:
// src/ops/pool.cpp), which have rules too.
#include <coil/ops.h>

#include <map>

#include "autograd/derivatives.h"

namespace coil::autograd {

namespace {

using C = const GradCtx&;

// conv2d's arguments after the tensors: stride, padding, dilation, groups.
std::vector<Arg> with_window(std::vector<Arg> tensors, const Args& a) {
  for (size_t i = 3; i < 7; ++i) tensors.push_back(a[i]);
  return tensors;
}

void conv2d_rule(C c) {
  const bool unbatched = c.in(0).dim() == 3;
  Tensor x = unbatched ? c.in(0).unsqueeze(0) : c.in(0);
  Tensor g = unbatched ? c.grad().unsqueeze(0) : c.grad();
  const Tensor& w = c.in(1);
  if (c.wants(2)) c.set(2, sum(g, {0, 2, 3}));
  if (c.wants(0)) {
    Tensor gx = call_op1(OpId::conv2d_input_backward, with_window({g, x, w}, c.args));
    c.set(0, unbatched ? gx.squeeze(0) : gx);
  }
  if (c.wants(1)) c.set(1, call_op1(OpId::conv2d_weight_backward, with_window({g, x, w}, c.args)));
}

// The backward ops are bilinear: conv2d_input_backward(g, x, w) is the adjoint of x -> conv2d(x,
// w) applied to g, so for an upstream gradient u (shaped as x), <u, gx> = <g, conv2d(u, w)>:
// its gradient is conv2d(u, w) for g and conv2d_weight_backward(g, u) for w. In the same way
// <v, gw> = <g, conv2d(x, v)> for conv2d_weight_backward. The argument only read for its sizes
// gets zeros.
void conv2d_backward_rule(C c) {
  const Tensor &g = c.in(0), &u = c.grad();
  const bool of_input = c.op == OpId::conv2d_input_backward;
  const Tensor& x = of_input ? c.args.tensor(1) : c.in(1);
  const Tensor& w = of_input ? c.in(2) : c.args.tensor(2);
  const std::vector<Arg> forward =
      with_window(of_input ? std::vector<Arg>{u, w, Arg()} : std::vector<Arg>{x, u, Arg()}, c.args);
  if (c.wants(0)) c.set(0, call_op1(OpId::conv2d, forward));
  if (of_input) {
    if (c.wants(1)) c.set(1, zeros_like(x));
    if (c.wants(2))
      c.set(2, call_op1(OpId::conv2d_weight_backward, with_window({g, u, w}, c.args)));
  } else {
    if (c.wants(1)) c.set(1, call_op1(OpId::conv2d_input_backward, with_window({g, x, u}, c.args)));
    if (c.wants(2)) c.set(2, zeros_like(w));
  }
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
          {OpId::conv2d_input_backward, conv2d_backward_rule},
          {OpId::conv2d_weight_backward, conv2d_backward_rule},
          {OpId::max_pool2d, pool_rule},
          {OpId::avg_pool2d, pool_rule},
          {OpId::adaptive_avg_pool2d, pool_rule},
          {OpId::max_pool2d_backward, pool_backward_rule},
          {OpId::avg_pool2d_backward, pool_backward_rule},
          {OpId::adaptive_avg_pool2d_backward, pool_backward_rule},
          {OpId::max_pool2d_double_backward, pool_backward_rule}};
}

}  // namespace coil::autograd
