// Sums: flattening, combining like terms (c1*t + c2*t -> (c1+c2)*t), sorting, and putting a
// value split by a divisor back together (c*d*(t // d) + c*(t % d) -> c*t).
#include <algorithm>

#include "sym/int_math.h"
#include "sym/intern.h"
#include "sym/linear.h"

namespace coil::sym {
namespace detail {
namespace {

// Terms by core (so "x0 + 8*x1" lists variables in name order), equal cores merged, zero
// coefficients dropped.
void combine(Sum& s) {
  std::sort(s.terms.begin(), s.terms.end(),
            [](const Term& a, const Term& b) { return compare(a.core, b.core) < 0; });
  std::vector<Term> out;
  for (const Term& t : s.terms) {
    if (!out.empty() && out.back().core == t.core)
      out.back().coef = checked_add(out.back().coef, t.coef);
    else
      out.push_back(t);
    if (out.back().coef == 0) out.pop_back();
  }
  s.terms = std::move(out);
}

// `s` times m, or false when a coefficient would overflow (then no rule uses it).
bool scaled(Sum s, int64_t m, Sum* out) {
  for (Term& t : s.terms)
    if (__builtin_mul_overflow(t.coef, m, &t.coef)) return false;
  if (__builtin_mul_overflow(s.constant, m, &s.constant)) return false;
  *out = std::move(s);
  return true;
}

// Removes the terms of `part` from `s` (skipping term `skip`) when every one of them is in `s`
// with exactly its coefficient, so the rewrite strictly shortens the sum.
bool remove_part(Sum& s, size_t skip, const Sum& part) {
  if (part.terms.empty()) return false;
  std::vector<size_t> hits;
  for (const Term& p : part.terms) {
    size_t i = 0;
    while (i < s.terms.size() && (i == skip || s.terms[i].core != p.core)) ++i;
    if (i == s.terms.size() || s.terms[i].coef != p.coef) return false;
    hits.push_back(i);
  }
  hits.push_back(skip);
  std::sort(hits.rbegin(), hits.rend());
  for (size_t i : hits) s.terms.erase(s.terms.begin() + static_cast<std::ptrdiff_t>(i));
  s.constant = checked_sub(s.constant, part.constant);
  return true;
}

// Replaces term i and `partner` by m*whole when `partner` is in `s`.
bool replace_pair(Sum& s, size_t i, const Sum& partner, Expr whole, int64_t m) {
  Sum w;
  if (!scaled(as_sum(whole), m, &w) || !remove_part(s, i, partner)) return false;
  s.terms.insert(s.terms.end(), w.terms.begin(), w.terms.end());
  s.constant = checked_add(s.constant, w.constant);
  return true;
}

// c*(M/L)*(y // M) + c*((x % M) // L) -> c*(y // L), for L | M and y % M == x % M (y is x, or
// x % U with M | U): the two halves of y // L split at M. Term i is the lower half.
bool merge_lower_half(Sum& s, size_t i) {
  Expr core = s.terms[i].core;
  int64_t c = s.terms[i].coef;
  Expr x = core->args()[0]->args()[0];
  if (!has_const_divisor(core->args()[0])) return false;
  int64_t m = core->args()[0]->args()[1]->value(), l = core->args()[1]->value();
  if (m % l != 0 || mul_overflows(c, m / l)) return false;
  for (const Term& t : s.terms) {
    if (t.core->kind() != Kind::FloorDiv || !t.core->args()[1]->is_const(m) ||
        t.coef != c * (m / l))
      continue;
    Expr y = t.core->args()[0];
    bool same_low_part = y == x || (y->kind() == Kind::Mod && y->args()[0] == x &&
                                    has_const_divisor(y) && y->args()[1]->value() % m == 0);
    if (same_low_part && replace_pair(s, i, Sum{{t}, 0}, floordiv(y, l), c)) return true;
  }
  return false;
}

// The same split scaled by sizes: c*e*(t % d) + c*e*d*(t // d) -> c*e*t for a divisor d (a size
// or a constant) and a product of sizes e (a flat row index split into batch and channel, times
// the row length; a flat index over [n, 64, h, w] unravelled by run-time sizes). Term i is the
// mod's.
bool merge_scaled_split(Sum& s, size_t i) {
  const std::vector<Expr>& factors = s.terms[i].core->args();
  Expr split = nullptr, scale = constant(1);
  for (Expr f : factors) {
    if (f->kind() == Kind::Mod && !split)
      split = f;
    else
      scale = mul(scale, f);
  }
  if (!split || split->args()[1]->kind() == Kind::Add) return false;
  const Expr t = split->args()[0], d = split->args()[1];
  const int64_t c = s.terms[i].coef;
  Sum partner = as_sum(mul(constant(c), mul(scale, mul(d, floordiv(t, d)))));
  return replace_pair(s, i, partner, mul(scale, t), c);
}

// Finds two terms that are the halves of a value split by a divisor and replaces them by the
// value: c*(t % d) + c*d*(t // d) -> c*t, from either half. The other half is built by
// floordiv/mod, so it matches whatever canonical form t // d or t % d takes (for t = x % 16
// and d = 4, t % d is x % 4).
bool merge_split_pair(Sum& s) {
  for (size_t i = 0; i < s.terms.size(); ++i) {
    Expr core = s.terms[i].core;
    int64_t c = s.terms[i].coef;
    if (core->kind() == Kind::Mul && merge_scaled_split(s, i)) return true;
    if (core->kind() != Kind::Mod && core->kind() != Kind::FloorDiv) continue;
    Expr t = core->args()[0];
    if (!has_const_divisor(core)) {
      // c*(t % d) + c*d*(t // d) with d a size or a product of sizes: found from the mod's
      // side (the floordiv's term is a product with d's factors). A sum as divisor is
      // distributed over in every product, so no term shows the split.
      Expr d = core->args()[1];
      if (core->kind() != Kind::Mod || d->kind() == Kind::Add) continue;
      Sum partner = as_sum(mul(constant(c), mul(d, floordiv(t, d))));
      if (replace_pair(s, i, partner, t, c)) return true;
      continue;
    }
    int64_t d = core->args()[1]->value();
    Sum partner;
    if (core->kind() == Kind::Mod) {
      if (!mul_overflows(c, d) && scaled(as_sum(floordiv(t, d)), c * d, &partner) &&
          replace_pair(s, i, partner, t, c))
        return true;
    } else if (c % d == 0) {
      if (scaled(as_sum(mod(t, d)), c / d, &partner) && replace_pair(s, i, partner, t, c / d))
        return true;
    } else if (t->kind() == Kind::Mod && merge_lower_half(s, i)) {
      return true;
    }
  }
  return false;
}

}  // namespace

Sum as_sum(Expr e) {
  Sum s;
  if (e->is_const()) {
    s.constant = e->value();
  } else if (e->kind() == Kind::Add) {
    for (Expr a : e->args()) {
      if (a->is_const())
        s.constant = a->value();
      else
        s.terms.push_back(as_term(a));
    }
  } else {
    s.terms.push_back(as_term(e));
  }
  return s;
}

// Each merge replaces two terms by the terms of a strictly smaller expression, so it ends.
Expr from_sum(Sum s) {
  combine(s);
  while (merge_split_pair(s)) combine(s);
  if (s.terms.empty()) return constant(s.constant);
  if (s.terms.size() == 1 && s.constant == 0) return scale(s.terms[0].core, s.terms[0].coef);
  std::vector<Expr> args;
  for (const Term& t : s.terms) args.push_back(scale(t.core, t.coef));
  if (s.constant != 0) args.push_back(constant(s.constant));
  return make(Kind::Add, std::move(args));
}

}  // namespace detail

Expr add(Expr a, Expr b) {
  COIL_ASSERT(a && b, "sym::add of a null expression");
  if (a->is_const() && b->is_const()) return constant(detail::checked_add(a->value(), b->value()));
  if (b->is_const(0)) return a;
  if (a->is_const(0)) return b;
  detail::Sum s = detail::as_sum(a);
  detail::Sum t = detail::as_sum(b);
  s.terms.insert(s.terms.end(), t.terms.begin(), t.terms.end());
  s.constant = detail::checked_add(s.constant, t.constant);
  return detail::from_sum(std::move(s));
}

Expr neg(Expr a) { return mul(a, constant(-1)); }
Expr sub(Expr a, Expr b) { return add(a, neg(b)); }

}  // namespace coil::sym
