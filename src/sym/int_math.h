// int64 arithmetic for the index algebra: Python's floor division and modulo, exact
// arithmetic that reports overflow (constant folding must never wrap silently), and
// saturating arithmetic for value ranges (a bound clamped outward stays a sound bound).
#pragma once

#include <cstdint>
#include <limits>

#include <coil/error.h>

namespace coil::sym::detail {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// floor(a / b) and a - b * floor(a / b) for b > 0 (C's `/` and `%` truncate toward zero).
inline int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b < 0 ? 1 : 0); }
inline int64_t floor_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  return r < 0 ? r + b : r;
}

inline int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  COIL_ASSERT(!__builtin_add_overflow(a, b, &r), "index arithmetic overflows int64: ", a, " + ", b);
  return r;
}
inline int64_t checked_sub(int64_t a, int64_t b) {
  int64_t r;
  COIL_ASSERT(!__builtin_sub_overflow(a, b, &r), "index arithmetic overflows int64: ", a, " - ", b);
  return r;
}
inline int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  COIL_ASSERT(!__builtin_mul_overflow(a, b, &r), "index arithmetic overflows int64: ", a, " * ", b);
  return r;
}
inline bool mul_overflows(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r);
}

inline int64_t saturating_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? kMax : kMin;
  return r;
}
inline int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return (a < 0) != (b < 0) ? kMin : kMax;
  return r;
}

// gcd(a, |b|) for a >= 0 (gcd(0, b) == |b|); it fits unless a == 0 and b is the int64 minimum.
inline int64_t gcd_with(int64_t a, int64_t b) {
  uint64_t x = static_cast<uint64_t>(a);
  uint64_t y = b < 0 ? 0 - static_cast<uint64_t>(b) : static_cast<uint64_t>(b);
  while (y != 0) {
    uint64_t t = x % y;
    x = y;
    y = t;
  }
  return static_cast<int64_t>(x);
}

}  // namespace coil::sym::detail
