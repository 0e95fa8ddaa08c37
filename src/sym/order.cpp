// The structural order: by kind, then constant value, variable name and range, then operands
// lexicographically. Never by address, so sorted operands (and so printed text and generated
// code) are the same in every process.
#include "sym/intern.h"

namespace coil::sym {

int detail::compare(Expr a, Expr b) {
  if (a == b) return 0;
  if (a->kind() != b->kind()) return a->kind() < b->kind() ? -1 : 1;
  if (a->value() != b->value()) return a->value() < b->value() ? -1 : 1;
  if (int c = a->name().compare(b->name())) return c < 0 ? -1 : 1;
  if (a->kind() == Kind::Var) {
    Range ra = a->range(), rb = b->range();
    if (ra.lo != rb.lo) return ra.lo < rb.lo ? -1 : 1;
    if (ra.hi != rb.hi) return ra.hi < rb.hi ? -1 : 1;
    if (a->bound() != b->bound()) {
      if (!a->bound() || !b->bound()) return a->bound() ? 1 : -1;
      return compare(a->bound(), b->bound());
    }
  }
  const std::vector<Expr>& x = a->args();
  const std::vector<Expr>& y = b->args();
  for (size_t i = 0; i < x.size() && i < y.size(); ++i)
    if (int c = compare(x[i], y[i])) return c;
  return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
}

bool less(Expr a, Expr b) { return detail::compare(a, b) < 0; }

}  // namespace coil::sym
