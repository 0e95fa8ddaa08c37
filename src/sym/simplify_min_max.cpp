// min and max: fold when one operand is provably never above (below) the other, judged by
// the ranges of the operands and of their difference (min(x, x + 1) -> x needs the latter);
// otherwise the operands are sorted (a constant last, as in "max(x - 1, 0)"), so min(a, b) and
// min(b, a) are one node.
#include <algorithm>

#include <coil/error.h>
#include "sym/intern.h"

namespace coil::sym {
namespace {

// True when a <= b for every value of the variables.
bool never_above(Expr a, Expr b) {
  return a->range().hi <= b->range().lo || sub(a, b)->range().hi <= 0;
}

Expr min_or_max(Kind kind, Expr a, Expr b) {
  COIL_ASSERT(a && b, "sym::min/max of a null expression");
  if (a == b) return a;
  bool a_first = kind == Kind::Min;  // min keeps the smaller operand, max the larger
  if (never_above(a, b)) return a_first ? a : b;
  if (never_above(b, a)) return a_first ? b : a;
  if (a->is_const() || (!b->is_const() && less(b, a))) std::swap(a, b);  // constants last
  return detail::make(kind, {a, b});
}

}  // namespace

Expr min(Expr a, Expr b) { return min_or_max(Kind::Min, a, b); }
Expr max(Expr a, Expr b) { return min_or_max(Kind::Max, a, b); }

}  // namespace coil::sym
