// Floor division and modulo by positive constants (Python semantics), brought to TVM's
// canonical ((x % a) // b) form. What makes a rule exact:
//   - floor((d*q + r) / d) == q + floor(r / d) and (d*q + r) % d == r % d for integers q, r,
//     so multiples of d leave a floordiv as a quotient and drop out of a mod;
//   - when every value of x lies in [k*d, k*d + d-1], x // d == k and x % d == x - k*d;
//   - (x // a) // b == x // (a*b) and (x // b) % a == (x % (a*b)) // b;
//   - a common factor g of d and of every coefficient cancels:
//     (g*x + c) // (g*e) == (x + c // g) // e and (g*x + c) % (g*e) == g*((x + c // g) % e) + c % g
//     for 0 <= c (the part c % g < g never carries into the quotient); and so does a low part
//     whose values lie in [0, g) as a constant's c % g does (split_low_part).
// A symbolic divisor d (a size, or a product of sizes and a constant) has fewer rules: terms
// that are multiples of d leave as a quotient or drop out of a mod, a numerator in [0, d)
// stays, (x // a) // d == x // (a*d), and a floordiv's low part goes where d's constant
// factor allows it, as for a constant divisor.
#include <algorithm>
#include <cstdlib>

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

// s == g*high + low with g > 1 a factor of d and every value of low in [0, g): the terms of
// largest |coefficient| make up `high` (g is their common factor with d), the others and the
// constant `low`. Then (g*high + low) // d == high // (d/g) and (g*high + low) % d ==
// g*(high % (d/g)) + low, as for a constant low part: a flattened index (768*r + x0) // 196608
// with x0 in [0, 768) is r // 256. False when no split has one.
bool split_low_part(const Sum& s, int64_t d, Sum* high, Expr* low, int64_t* g) {
  std::vector<Term> terms = s.terms;
  std::stable_sort(terms.begin(), terms.end(), [](const Term& a, const Term& b) {
    return std::abs(a.coef) > std::abs(b.coef);
  });
  for (size_t n = terms.size(); n-- > 1;) {  // high = terms[0, n), longest first
    int64_t f = d;
    for (size_t i = 0; i < n; ++i) f = detail::gcd_with(f, terms[i].coef);
    if (f <= 1) continue;
    Sum l;
    l.terms.assign(terms.begin() + static_cast<std::ptrdiff_t>(n), terms.end());
    l.constant = s.constant;
    Expr le = detail::from_sum(std::move(l));
    if (le->range().lo < 0 || le->range().hi >= f) continue;
    high->terms.assign(terms.begin(), terms.begin() + static_cast<std::ptrdiff_t>(n));
    for (Term& t : high->terms) t.coef /= f;
    high->constant = 0;
    *low = le;
    *g = f;
    return true;
  }
  return false;
}

}  // namespace

Expr floordiv(Expr e, int64_t d) {
  COIL_ASSERT(e, "sym::floordiv of a null expression");
  COIL_ASSERT(d > 0, "floordiv of ", to_string(e), " by ", d, ": divisors are positive");
  if (d == 1) return e;
  int64_t q = floor_div(e->range().lo, d);
  if (q == floor_div(e->range().hi, d)) return constant(q);
  if (e->kind() == Kind::FloorDiv && !has_const_divisor(e))
    return floordiv(e->args()[0], mul(e->args()[1], constant(d)));
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
  Sum high;
  Expr low;
  int64_t low_g = 1;
  if (g == 1 && split_low_part(rest, d, &high, &low, &low_g))
    return add(detail::from_sum(std::move(quotient)),
               floordiv(detail::from_sum(std::move(high)), d / low_g));
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
  if (e->kind() == Kind::FloorDiv && has_const_divisor(e) &&
      !detail::mul_overflows(e->args()[1]->value(), d)) {
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
    if (t.core->kind() == Kind::Mod && has_const_divisor(t.core) &&
        t.core->args()[1]->value() % d == 0) {
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
  Sum high;
  Expr low;
  int64_t low_g = 1;
  if (g == 1 && split_low_part(rest, d, &high, &low, &low_g))
    return add(mul(constant(low_g), mod(detail::from_sum(std::move(high)), d / low_g)), low);
  if (g > 1) {
    int64_t low = floor_mod(rest.constant, g);
    return add(mul(constant(g), mod(divided(std::move(rest), g), d / g)), constant(low));
  }
  if (!changed) return detail::make(Kind::Mod, {e, constant(d)});
  return mod(detail::from_sum(std::move(rest)), d);
}

namespace {

// t / d when the monomial t is a multiple of the monomial d (d's constant divides t's and each
// of d's factors is one of t's), else null.
Expr exact_quotient(const Term& t, Expr d) {
  if (d->kind() == Kind::Add) return nullptr;  // products distribute: no term has it as a factor
  Term dt = detail::as_term(d);
  if (dt.coef <= 0 || t.coef % dt.coef != 0) return nullptr;
  std::vector<Expr> rest = t.core->kind() == Kind::Mul ? t.core->args() : std::vector<Expr>{t.core};
  std::vector<Expr> need =
      dt.core->kind() == Kind::Mul ? dt.core->args() : std::vector<Expr>{dt.core};
  for (Expr f : need) {
    auto it = std::find(rest.begin(), rest.end(), f);
    if (it == rest.end()) return nullptr;
    rest.erase(it);
  }
  Expr q = constant(t.coef / dt.coef);
  for (Expr f : rest) q = mul(q, f);
  return q;
}

// `e` split into the multiples of d (their quotient) and the rest.
void split_multiples(Expr e, Expr d, Sum* quotient, Sum* rest) {
  Sum s = detail::as_sum(e);
  for (const Term& t : s.terms) {
    if (Expr q = exact_quotient(t, d)) {
      Sum qs = detail::as_sum(q);
      quotient->terms.insert(quotient->terms.end(), qs.terms.begin(), qs.terms.end());
      quotient->constant = detail::checked_add(quotient->constant, qs.constant);
    } else {
      rest->terms.push_back(t);
    }
  }
  rest->constant = s.constant;
}

void check_divisor(Expr e, Expr d, const char* what) {
  COIL_ASSERT(e && d, "sym::", what, " of a null expression");
  COIL_ASSERT(d->range().lo >= 1, what, " of ", to_string(e), " by ", to_string(d),
              ": divisors are positive");
}

// An upper bound of e over its loop indices: each index replaced by its last value (bound - 1
// for a loop over a run-time size, the range's top for a constant extent), the sizes kept.
// Null unless e grows with each index: a sum of terms where an index appears only as a factor
// of a product of non-negative variables with a positive coefficient (no floordiv, mod, min or
// max around it).
Expr index_upper_bound(Expr e) {
  Bindings last;
  for (const Term& t : detail::as_sum(e).terms) {
    const std::vector<Expr> factors =
        t.core->kind() == Kind::Mul ? t.core->args() : std::vector<Expr>{t.core};
    bool indexed = false;
    for (Expr f : factors) {
      if (f->kind() != Kind::Var || f->range().lo < 0) return nullptr;
      if (f->bound()) {
        indexed = true;
        last.emplace(f, sub(f->bound(), constant(1)));
      } else if (f->range().hi < kMaxSize) {  // an index of a constant extent, not a size
        indexed = true;
        last.emplace(f, constant(f->range().hi));
      }
    }
    if (indexed && t.coef <= 0) return nullptr;
  }
  return last.empty() ? e : substitute(e, last);
}

// Is every value of e in [0, d)? By ranges; because e is a loop index over d; or because its
// largest value over loop indices is below d (a row-major offset in a tensor of d elements:
// x3 + s3*x2 + s2*s3*x1 < s1*s2*s3).
// A minimum is below d when either side is; a quotient a // k when a is below k*d (a partial
// reduction's clamped index, min(i, n - 1) // s1 < s0 for n = s0*s1).
bool below(Expr e, Expr d) {
  if (e->range().lo < 0) return false;
  if (e->range().hi < d->range().lo || (e->kind() == Kind::Var && e->bound() == d)) return true;
  if (e->kind() == Kind::Min) return below(e->args()[0], d) || below(e->args()[1], d);
  if (e->kind() == Kind::FloorDiv) return below(e->args()[0], mul(e->args()[1], d));
  if (e->kind() != Kind::Add && e->kind() != Kind::Mul) return false;
  Expr top = index_upper_bound(e);
  return top && sub(sub(d, constant(1)), top)->range().lo >= 0;
}

}  // namespace

Expr floordiv(Expr e, Expr d) {
  if (d && d->is_const()) return floordiv(e, d->value());
  check_divisor(e, d, "floordiv");
  if (below(e, d)) return constant(0);
  if (e->kind() == Kind::FloorDiv) return floordiv(e->args()[0], mul(e->args()[1], d));
  Sum quotient, rest;
  split_multiples(e, d, &quotient, &rest);
  // A constant factor of the divisor takes a low part off as a constant divisor does:
  // (4*q + j) // (4*s) == q // s for j in [0, 4).
  Sum ds = detail::as_sum(d), high;
  Expr low;
  int64_t g = 1;
  if (ds.terms.size() == 1 && ds.constant == 0 && ds.terms[0].coef > 1 &&
      split_low_part(rest, ds.terms[0].coef, &high, &low, &g))
    return add(detail::from_sum(std::move(quotient)),
               floordiv(detail::from_sum(std::move(high)), divided(std::move(ds), g)));
  if (quotient.terms.empty() && quotient.constant == 0) return detail::make(Kind::FloorDiv, {e, d});
  return add(detail::from_sum(std::move(quotient)), floordiv(detail::from_sum(std::move(rest)), d));
}

Expr mod(Expr e, Expr d) {
  if (d && d->is_const()) return mod(e, d->value());
  check_divisor(e, d, "mod");
  if (below(e, d)) return e;
  if (e->kind() == Kind::Mod && e->args()[1] == d) return e;
  Sum quotient, rest;
  split_multiples(e, d, &quotient, &rest);
  Expr r = detail::from_sum(std::move(rest));
  if (r->is_const(0)) return r;
  if (quotient.terms.empty() && quotient.constant == 0) return detail::make(Kind::Mod, {e, d});
  return mod(r, d);
}

}  // namespace coil::sym
