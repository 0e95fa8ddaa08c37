// Floor division and modulo by positive constants (Python semantics), brought to TVM's
// canonical ((x % a) // b) form. What makes a rule exact:
//   - floor((d*q + r) / d) == q + floor(r / d) and (d*q + r) % d == r % d for integers q, r,
//     so multiples of d leave a floordiv as a quotient and drop out of a mod;
//   - when every value of x lies in [k*d, k*d + d-1], x // d == k and x % d == x - k*d;
//   - (x // a) // b == x // (a*b) and (x // b) % a == (x % (a*b)) // b;
//   - a common factor g of d and of every coefficient cancels:
//     (g*x + c) // (g*e) == (x + c // g) // e and (g*x + c) % (g*e) == g*((x + c // g) % e) + c % g
//     for 0 <= c (the part c % g < g never carries into the quotient).
#include "sym/int_math.h"
#include "sym/intern.h"
#include "sym/linear.h"

namespace coil::sym {
namespace {

using detail::floor_div;
using detail::floor_mod;
using detail::Sum;
using detail::Term;

// The gcd of d and the coefficients of s's terms.
int64_t common_factor(const Sum& s, int64_t d) {
  int64_t g = d;
  for (const Term& t : s.terms) g = detail::gcd_with(g, t.coef);
  return g;
}

// s with its terms' coefficients and its constant divided by g (the constant rounded down).
Expr divided(Sum s, int64_t g) {
  for (Term& t : s.terms) t.coef /= g;
  s.constant = floor_div(s.constant, g);
  return detail::from_sum(std::move(s));
}

}  // namespace

Expr floordiv(Expr e, int64_t d) {
  COIL_ASSERT(e, "sym::floordiv of a null expression");
  COIL_ASSERT(d > 0, "floordiv of ", to_string(e), " by ", d, ": divisors are positive");
  if (d == 1) return e;
  int64_t q = floor_div(e->range().lo, d);
  if (q == floor_div(e->range().hi, d)) return constant(q);
  if (e->kind() == Kind::FloorDiv && !detail::mul_overflows(e->args()[1]->value(), d))
    return floordiv(e->args()[0], e->args()[1]->value() * d);

  // e == d*quotient + rest, with the constant of rest in [0, d).
  Sum s = detail::as_sum(e), quotient, rest;
  for (const Term& t : s.terms) {
    if (t.coef % d == 0)
      quotient.terms.push_back({t.coef / d, t.core});
    else
      rest.terms.push_back(t);
  }
  quotient.constant = floor_div(s.constant, d);
  rest.constant = floor_mod(s.constant, d);
  int64_t g = common_factor(rest, d);
  if (quotient.terms.empty() && quotient.constant == 0 && g == 1)
    return detail::make(Kind::FloorDiv, {e, constant(d)});
  return add(detail::from_sum(std::move(quotient)), floordiv(divided(std::move(rest), g), d / g));
}

Expr mod(Expr e, int64_t d) {
  COIL_ASSERT(e, "sym::mod of a null expression");
  COIL_ASSERT(d > 0, "mod of ", to_string(e), " by ", d, ": divisors are positive");
  if (d == 1) return constant(0);
  int64_t q = floor_div(e->range().lo, d);
  if (q == floor_div(e->range().hi, d))
    return q == 0 ? e : add(e, constant(detail::checked_mul(q, -d)));
  if (e->kind() == Kind::FloorDiv && !detail::mul_overflows(e->args()[1]->value(), d)) {
    int64_t b = e->args()[1]->value();
    return floordiv(mod(e->args()[0], b * d), b);
  }

  // Reduce modulo d: coefficients to (-d, d) (c*x and (c % d)*x differ by a multiple of d),
  // the constant to [0, d), and x % (k*d) to x (they too differ by a multiple of d).
  Sum s = detail::as_sum(e), rest;
  bool changed = false;
  for (const Term& t : s.terms) {
    int64_t c = t.coef % d;
    changed |= c != t.coef;
    if (c == 0) continue;
    if (t.core->kind() == Kind::Mod && t.core->args()[1]->value() % d == 0) {
      Sum x = detail::as_sum(t.core->args()[0]);
      for (const Term& u : x.terms) rest.terms.push_back({detail::checked_mul(u.coef, c), u.core});
      rest.constant = detail::checked_add(rest.constant, detail::checked_mul(x.constant, c));
      changed = true;
    } else {
      rest.terms.push_back({c, t.core});
    }
  }
  rest.constant = floor_mod(detail::checked_add(rest.constant, s.constant), d);
  changed |= rest.constant != s.constant;
  int64_t g = common_factor(rest, d);
  if (g > 1) {
    int64_t low = floor_mod(rest.constant, g);
    return add(mul(constant(g), mod(divided(std::move(rest), g), d / g)), constant(low));
  }
  if (!changed) return detail::make(Kind::Mod, {e, constant(d)});
  return mod(detail::from_sum(std::move(rest)), d);
}

}  // namespace coil::sym
