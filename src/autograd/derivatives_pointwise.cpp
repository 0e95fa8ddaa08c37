// Derivatives of the pointwise ops. g is the output's gradient, x (a, b) the inputs, y the
// output; every formula is the textbook one, written with coil ops.
#include <coil/ops.h>

#include <cmath>
#include <numbers>

#include "autograd/derivatives.h"

namespace coil::autograd {

namespace {

using C = const GradCtx&;

// Argument `i` as a tensor: the saved tensor, or a plain number as a 0-dim tensor of `like`'s
// dtype (so it does not change the gradient's dtype).
Tensor operand(C c, size_t i, const Tensor& like) {
  if (c.args.is_tensor(i)) return c.in(i);
  return scalar_tensor(c.args.scalar(i), like.dtype(), like.device());
}

// d/dx of a unary op from the input x (on_x) or from the output y (on_y): a rule reads only
// what it needs, so an in-place change of the other does not stop it.
template <auto F>
void on_x(C c) {
  if (c.wants(0)) c.set(0, F(c.grad(), c.in(0)));
}
template <auto F>
void on_y(C c) {
  if (c.wants(0)) c.set(0, F(c.grad(), c.out()));
}

void zero(C c) {
  if (c.wants(0)) c.set(0, zeros_like(c.grad()));
}

const double kLn2 = std::numbers::ln2;

Tensor gelu_grad(C c) {
  const Tensor& x = c.in(0);
  if (c.args.str(1) == "tanh") {
    const double k = std::sqrt(2 / std::numbers::pi), a = 0.044715;
    Tensor t = tanh((x + x * x * x * a) * k);
    return c.grad() * ((t + 1) * 0.5 + x * 0.5 * (1 - t * t) * k * (x * x * (3 * a) + 1));
  }
  Tensor cdf = (erf(x * std::numbers::sqrt2 / 2) + 1) * 0.5;
  Tensor pdf = exp(x * x * -0.5) * (1 / std::sqrt(2 * std::numbers::pi));
  return c.grad() * (cdf + x * pdf);
}

// max/min: the gradient goes to the larger (smaller) input, split evenly on ties.
template <bool Max>
void extremum(C c) {
  Tensor a = operand(c, 0, c.grad()), b = operand(c, 1, c.grad());
  const Tensor& g = c.grad();
  Tensor tie = where(a == b, g * 0.5, 0.0);
  if (c.wants(0)) c.set(0, where(Max ? a > b : a < b, g, tie));
  if (c.wants(1)) c.set(1, where(Max ? b > a : b < a, g, tie));
}

void clamp_rule(C c) {
  if (!c.wants(0)) return;
  const Tensor& x = c.in(0);
  Tensor inside = ones_like(x).to(kBool);
  if (auto lo = c.args.opt_scalar(1)) inside = inside && (x >= *lo);
  if (auto hi = c.args.opt_scalar(2)) inside = inside && (x <= *hi);
  c.set(0, where(inside, c.grad(), 0.0));
}

void div_rule(C c) {
  const Tensor& g = c.grad();
  if (c.args.opt_str(2)) {  // rounding division is piecewise constant
    if (c.wants(0)) c.set(0, zeros_like(g));
    if (c.wants(1)) c.set(1, zeros_like(g));
    return;
  }
  Tensor b = operand(c, 1, g);
  if (c.wants(0)) c.set(0, g / b);
  if (c.wants(1)) c.set(1, -g * c.out() / b);
}

void pow_rule(C c) {
  const Tensor& g = c.grad();
  Tensor a = operand(c, 0, g), b = operand(c, 1, g);
  if (c.wants(0)) c.set(0, where(b == 0, 0.0, g * b * pow(a, b - 1)));
  // d/db a^b = a^b log a; at a = 0 PyTorch takes 0 (the limit for b > 0).
  if (c.wants(1)) c.set(1, where(a == 0, 0.0, g * c.out() * log(a)));
}

}  // namespace

std::vector<RuleEntry> pointwise_rules() {
  using O = OpId;
  // clang-format off
  return {
    {O::neg, [](C c) { if (c.wants(0)) c.set(0, -c.grad()); }},
    {O::abs, on_x<[](const Tensor& g, const Tensor& x) { return g * sign(x); }>},
    {O::sign, zero},
    {O::floor, zero},
    {O::ceil, zero},
    {O::round, zero},
    {O::trunc, zero},
    {O::exp, on_y<[](const Tensor& g, const Tensor& y) { return g * y; }>},
    {O::exp2, on_y<[](const Tensor& g, const Tensor& y) { return g * y * kLn2; }>},
    {O::expm1, on_y<[](const Tensor& g, const Tensor& y) { return g * (y + 1); }>},
    {O::log, on_x<[](const Tensor& g, const Tensor& x) { return g / x; }>},
    {O::log2, on_x<[](const Tensor& g, const Tensor& x) { return g / (x * kLn2); }>},
    {O::log1p, on_x<[](const Tensor& g, const Tensor& x) { return g / (x + 1); }>},
    {O::sqrt, on_y<[](const Tensor& g, const Tensor& y) { return g / (y * 2); }>},
    {O::rsqrt, on_y<[](const Tensor& g, const Tensor& y) { return g * y * y * y * -0.5; }>},
    {O::reciprocal, on_y<[](const Tensor& g, const Tensor& y) { return -g * y * y; }>},
    {O::sin, on_x<[](const Tensor& g, const Tensor& x) { return g * cos(x); }>},
    {O::cos, on_x<[](const Tensor& g, const Tensor& x) { return -g * sin(x); }>},
    {O::tan, on_y<[](const Tensor& g, const Tensor& y) { return g * (y * y + 1); }>},
    {O::tanh, on_y<[](const Tensor& g, const Tensor& y) { return g * (1 - y * y); }>},
    {O::sigmoid, on_y<[](const Tensor& g, const Tensor& y) { return g * y * (1 - y); }>},
    {O::relu, on_y<[](const Tensor& g, const Tensor& y) { return where(y > 0, g, 0.0); }>},
    {O::silu, on_x<[](const Tensor& g, const Tensor& x) {
      Tensor s = sigmoid(x);
      return g * s * (x * (1 - s) + 1);
    }>},
    {O::erf, on_x<[](const Tensor& g, const Tensor& x) {
      return g * exp(-(x * x)) * (2 / std::sqrt(std::numbers::pi));
    }>},
    {O::gelu, [](C c) { if (c.wants(0)) c.set(0, gelu_grad(c)); }},
    {O::to_dtype, [](C c) { c.set(0, c.grad()); }},
    {O::clone, [](C c) { c.set(0, c.grad()); }},
    {O::contiguous, [](C c) { c.set(0, c.grad()); }},
    {O::to_device, [](C c) { c.set(0, c.grad().to(c.in(0).device())); }},
    {O::add, [](C c) { c.set(0, c.grad()); c.set(1, c.grad()); }},
    {O::sub, [](C c) { c.set(0, c.grad()); if (c.wants(1)) c.set(1, -c.grad()); }},
    {O::mul, [](C c) {
      if (c.wants(0)) c.set(0, c.grad() * operand(c, 1, c.grad()));
      if (c.wants(1)) c.set(1, c.grad() * operand(c, 0, c.grad()));
    }},
    {O::div, div_rule},
    {O::pow, pow_rule},
    {O::remainder, [](C c) {
      c.set(0, c.grad());
      if (c.wants(1)) c.set(1, -c.grad() * floor(operand(c, 0, c.grad()) / c.in(1)));
    }},
    {O::maximum, extremum<true>},
    {O::minimum, extremum<false>},
    {O::atan2, [](C c) {
      Tensor a = operand(c, 0, c.grad()), b = operand(c, 1, c.grad());
      Tensor scale = c.grad() / (a * a + b * b);
      if (c.wants(0)) c.set(0, scale * b);
      if (c.wants(1)) c.set(1, -scale * a);
    }},
    {O::where, [](C c) {
      if (c.wants(1)) c.set(1, where(c.in(0), c.grad(), 0.0));
      if (c.wants(2)) c.set(2, where(c.in(0), 0.0, c.grad()));
    }},
    {O::clamp, clamp_rule},
    {O::tril, [](C c) { c.set(0, tril(c.grad(), c.args.i64(1))); }},
    {O::triu, [](C c) { c.set(0, triu(c.grad(), c.args.i64(1))); }},
  };
  // clang-format on
}

}  // namespace coil::autograd
