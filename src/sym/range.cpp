// Value ranges by interval arithmetic. Bounds saturate at the int64 limits: a clamped bound
// is still a bound, because every value an expression takes is an int64.
#include <algorithm>

#include "sym/int_math.h"
#include "sym/intern.h"

namespace coil::sym::detail {
namespace {

Range add_ranges(Range a, Range b) {
  return {saturating_add(a.lo, b.lo), saturating_add(a.hi, b.hi)};
}

// The product's extremes are among the corner products (signs may flip either bound).
Range mul_ranges(Range a, Range b) {
  int64_t c[] = {saturating_mul(a.lo, b.lo), saturating_mul(a.lo, b.hi), saturating_mul(a.hi, b.lo),
                 saturating_mul(a.hi, b.hi)};
  return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}

// Floor division is monotone in the numerator.
Range floordiv_range(Range a, int64_t d) { return {floor_div(a.lo, d), floor_div(a.hi, d)}; }

// Exact for an interval numerator: within one multiple of d the remainder is the numerator
// shifted; across a multiple it wraps and covers both ends of [0, d-1].
Range mod_range(Range a, int64_t d) {
  int64_t q = floor_div(a.lo, d);
  if (q != floor_div(a.hi, d)) return {0, d - 1};
  return {floor_mod(a.lo, d), floor_mod(a.hi, d)};
}

}  // namespace

Range range_of(Kind kind, const std::vector<Expr>& args) {
  switch (kind) {
    case Kind::Add:
    case Kind::Mul: {
      Range r = args[0]->range();
      for (size_t i = 1; i < args.size(); ++i)
        r = kind == Kind::Add ? add_ranges(r, args[i]->range()) : mul_ranges(r, args[i]->range());
      return r;
    }
    case Kind::FloorDiv:
      return floordiv_range(args[0]->range(), args[1]->value());
    case Kind::Mod:
      return mod_range(args[0]->range(), args[1]->value());
    case Kind::Min:
      return {std::min(args[0]->range().lo, args[1]->range().lo),
              std::min(args[0]->range().hi, args[1]->range().hi)};
    case Kind::Max:
      return {std::max(args[0]->range().lo, args[1]->range().lo),
              std::max(args[0]->range().hi, args[1]->range().hi)};
    case Kind::Const:
    case Kind::Var:
      break;
  }
  throw InternalError("sym: range_of a leaf (constants and variables carry their own)");
}

}  // namespace coil::sym::detail
