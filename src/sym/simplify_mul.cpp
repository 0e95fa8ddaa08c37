// Products: a constant coefficient first, then the non-constant factors sorted. Products
// distribute over sums (2*(x + y) -> 2*x + 2*y, (x + 1)*y -> x*y + y), so every expression is
// a flat sum of monomials and equal polynomials are the same node.
#include <algorithm>

#include "sym/int_math.h"
#include "sym/intern.h"
#include "sym/linear.h"

namespace coil::sym {
namespace detail {
namespace {

// The non-constant factors of a core.
std::vector<Expr> factors(Expr core) {
  if (core->kind() == Kind::Mul) return core->args();
  return {core};
}

}  // namespace

Term as_term(Expr e) {
  COIL_ASSERT(!e->is_const() && e->kind() != Kind::Add, "as_term of ", to_string(e));
  if (e->kind() != Kind::Mul || !e->args()[0]->is_const()) return {1, e};
  std::vector<Expr> rest(e->args().begin() + 1, e->args().end());
  return {e->args()[0]->value(), rest.size() == 1 ? rest[0] : make(Kind::Mul, std::move(rest))};
}

Expr scale(Expr core, int64_t coef) {
  if (coef == 0) return constant(0);
  if (coef == 1) return core;
  std::vector<Expr> args{constant(coef)};
  for (Expr f : factors(core)) args.push_back(f);
  return make(Kind::Mul, std::move(args));
}

}  // namespace detail

Expr mul(Expr a, Expr b) {
  using namespace detail;
  COIL_ASSERT(a && b, "sym::mul of a null expression");
  if (a->is_const() && b->is_const()) return constant(checked_mul(a->value(), b->value()));
  // Order the operands: an Add first (to distribute over), else a constant second.
  if (b->kind() == Kind::Add || a->is_const()) std::swap(a, b);
  if (b->is_const(1)) return a;
  if (a->kind() == Kind::Add) {
    // Distribute: (t1 + t2 + c) * b = t1*b + t2*b + c*b.
    Sum out;
    for (Expr t : a->args()) {
      Sum p = as_sum(mul(t, b));
      out.terms.insert(out.terms.end(), p.terms.begin(), p.terms.end());
      out.constant = checked_add(out.constant, p.constant);
    }
    return from_sum(std::move(out));
  }
  if (b->is_const()) {
    Term t = as_term(a);
    return scale(t.core, checked_mul(t.coef, b->value()));
  }
  Term x = as_term(a), y = as_term(b);
  std::vector<Expr> fs = factors(x.core);
  for (Expr f : factors(y.core)) fs.push_back(f);
  std::sort(fs.begin(), fs.end(), less);
  return scale(make(Kind::Mul, std::move(fs)), checked_mul(x.coef, y.coef));
}

}  // namespace coil::sym
