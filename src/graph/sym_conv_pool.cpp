// The symbolic shape rules of convolution and pooling (and their backward ops): output sizes
// from the windows over each spatial dim, the channels related to the weight's.
#include <coil/error.h>

#include "graph/dims.h"
#include "graph/sym_rules.h"

namespace coil::detail_sym {

namespace {

using sym::Expr;
using Layouts = std::vector<SymLayout>;

// A conv/pool parameter: one value for both spatial dims, or two.
Expr pair_at(const SymShape& v, size_t k, int64_t fallback) {
  if (v.empty()) return sym::constant(fallback);
  return v.size() == 1 ? v[0] : v[k];
}

// (in + 2*pad - dil*(k - 1) - 1) // stride + 1, the window never starting past the input. The
// window's size is specialised (a model's constant, as the weight's it comes from), and so is
// the input's where the span could otherwise be negative within its symbol's range (a window
// wider than the smallest input the symbol allows): every loop extent the output's size makes
// must be provably non-negative, which a guard alone does not tell the index algebra.
Expr window_count(const SymCall& c, Expr in, Expr k, Expr stride, Expr pad, Expr dil) {
  if (!k->is_const()) k = sym::constant(c.guard_int(k));
  Expr span = in + 2 * pad - dil * (k - 1) - 1;
  if (span->range().lo < 0 && !in->is_const()) {
    in = sym::constant(c.guard_int(in));
    span = in + 2 * pad - dil * (k - 1) - 1;
  }
  c.le(sym::constant(0), span);
  COIL_ASSERT(stride->is_const(), c.why(), ": a symbolic stride");
  return sym::floordiv(span, stride->value()) + 1;
}

// conv2d's output sizes for its input and weight at arguments `at` and `at + 1` (stride, padding,
// dilation and groups at 3-6 in conv2d and in its backward ops).
SymShape conv_output(const SymCall& c, size_t at) {
  SymShape x = c.sizes(at), w = c.sizes(at + 1);
  SymShape stride = c.ints(3), padding = c.ints(4), dilation = c.ints(5);
  const size_t sp = x.size() - 2;          // the first spatial dim
  c.eq(x[sp - 1], w[1] * c.plain_int(6));  // input channels: the weight's, times the groups
  SymShape out = leading(x, 3);
  out.push_back(w[0]);
  for (size_t k = 0; k < 2; ++k)
    out.push_back(window_count(c, x[sp + k], w[2 + k], pair_at(stride, k, 1),
                               pair_at(padding, k, 0), pair_at(dilation, k, 1)));
  return out;
}

Layouts conv2d(const SymCall& c) {
  if (c.is_tensor(2)) c.eq(c.sizes(2)[0], c.sizes(1)[0]);
  return one(c.result(conv_output(c, 0)));
}

// conv2d's gradients: shaped like its input (or weight), the gradient like its output.
Layouts conv2d_backward(const SymCall& c) {
  eq_all(c, c.sizes(0), conv_output(c, 1));
  const size_t like = c.op() == OpId::conv2d_input_backward ? 1 : 2;
  return one(c.result(c.simplify(c.sizes(like))));
}

// PyTorch's pooling_output_shape on numbers (with ceil_mode the last window must still start
// inside the input or its left padding).
int64_t pooled_number(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil, bool ceil) {
  int64_t span = in + 2 * pad - dil * (k - 1) - 1 + (ceil ? stride - 1 : 0);
  int64_t out = (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
  if (ceil && (out - 1) * stride >= in + pad) --out;
  return out;
}

// The spatial sizes a pool gives over self (argument `self`), its parameters following self:
// kernel_size, stride, padding, [dilation,] ceil_mode.
SymShape pooled(const SymCall& c, size_t self, bool dilation_arg) {
  SymShape x = c.sizes(self), kernel = c.ints(self + 1), stride = c.ints(self + 2),
           padding = c.ints(self + 3);
  SymShape dilation = dilation_arg ? c.ints(self + 4) : SymShape{};
  const bool ceil_mode = std::get<bool>(c.args()[self + (dilation_arg ? 5 : 4)]);
  const size_t sp = x.size() - 2;
  SymShape out = leading(x, 2);
  for (size_t k = 0; k < 2; ++k) {
    Expr kk = pair_at(kernel, k, 1), st = stride.empty() ? kk : pair_at(stride, k, 1),
         pad = pair_at(padding, k, 0), dil = pair_at(dilation, k, 1);
    if (ceil_mode) {  // the last window's clipping is a comparison per size: specialise
      out.push_back(
          sym::constant(pooled_number(c.guard_int(x[sp + k]), c.guard_int(kk), c.guard_int(st),
                                      c.guard_int(pad), c.guard_int(dil), true)));
      continue;
    }
    out.push_back(window_count(c, x[sp + k], kk, st, pad, dil));
  }
  return out;
}

Layouts pool2d(const SymCall& c) { return one(c.result(pooled(c, 0, c.op() == OpId::max_pool2d))); }

Layouts adaptive_pool(const SymCall& c) {
  SymShape x = c.sizes(0), o = c.ints(1);
  return one(c.result(concat(leading(x, 2), {pair_at(o, 0, 1), pair_at(o, 1, 1)})));
}

// The pools' gradients: shaped like the input, the gradient like the pool's output
// (max_pool2d_double_backward, the adjoint, the other way round).
Layouts pool_backward(const SymCall& c) {
  SymShape grad = c.sizes(0), self = c.sizes(1);
  switch (c.op()) {
    case OpId::max_pool2d_double_backward:
      eq_all(c, grad, self);
      return one(c.result(pooled(c, 1, true)));
    case OpId::adaptive_avg_pool2d_backward:
      eq_all(c, leading(grad, 2), leading(self, 2));
      break;
    default:
      eq_all(c, grad, pooled(c, 1, c.op() == OpId::max_pool2d_backward));
  }
  return one(c.result(c.simplify(self)));
}

}  // namespace

void register_conv_pool_rules(std::vector<std::pair<OpId, Rule>>& rules) {
  rules.insert(rules.end(), {
                                {OpId::conv2d, conv2d},
                                {OpId::conv2d_input_backward, conv2d_backward},
                                {OpId::conv2d_weight_backward, conv2d_backward},
                                {OpId::max_pool2d, pool2d},
                                {OpId::avg_pool2d, pool2d},
                                {OpId::adaptive_avg_pool2d, adaptive_pool},
                                {OpId::max_pool2d_backward, pool_backward},
                                {OpId::avg_pool2d_backward, pool_backward},
                                {OpId::adaptive_avg_pool2d_backward, pool_backward},
                                {OpId::max_pool2d_double_backward, pool_backward},
                            });
}

}  // namespace coil::detail_sym
