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

// A divisor in [d.lo, d.hi] (d.lo >= 1): floor(x / d) is monotone in x, and in d for each sign
// of x, so the extremes are at the corners.
Range floordiv_range(Range a, Range d) {
  int64_t c[] = {floor_div(a.lo, d.lo), floor_div(a.lo, d.hi), floor_div(a.hi, d.lo),
                 floor_div(a.hi, d.hi)};
  return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}

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
      if (args[1]->is_const()) return floordiv_range(args[0]->range(), args[1]->value());
      return floordiv_range(args[0]->range(), args[1]->range());
    case Kind::Mod: {
      if (args[1]->is_const()) return mod_range(args[0]->range(), args[1]->value());
      // In [0, d - 1]; a non-negative numerator also bounds it.
      Range a = args[0]->range();
      int64_t hi = args[1]->range().hi - 1;
      return {0, a.lo >= 0 ? std::min(a.hi, hi) : hi};
    }
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
