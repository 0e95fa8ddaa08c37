// The simplifier's rules, one table per family: each row builds an expression through the
// constructors and states the canonical text it must print as.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "coil/error.h"
#include "sym/expr.h"

using namespace coil::sym;

namespace {

struct Case {
  Expr got;
  std::string want;
};

void check(const std::vector<Case>& table) {
  for (size_t i = 0; i < table.size(); ++i)
    EXPECT_EQ(to_string(table[i].got), table[i].want) << "row " << i;
}

// x in [0, 99], y in [0, 7] (below the divisor 8), z in [0, 31], n in [-8, 8].
const Expr x = index_var("x", 100);
const Expr y = index_var("y", 8);
const Expr z = index_var("z", 32);
const Expr n = var("n", {-8, 8});
const Expr c0 = constant(0);

}  // namespace

TEST(SymSimplify, ConstantsFold) {
  check({
      {constant(3) + constant(4), "7"},
      {constant(3) * constant(-4), "-12"},
      {floordiv(constant(-7), 2), "-4"},  // floor, not truncation
      {mod(constant(-7), 3), "2"},        // the divisor's sign
      {min(constant(3), constant(-1)), "-1"},
      {max(constant(3), constant(-1)), "3"},
  });
}

TEST(SymSimplify, SumsAndProducts) {
  check({
      {x + z, "x + z"},
      {z + x, "x + z"},  // terms sorted by their variables
      {x + x, "2*x"},
      {3 * x - x, "2*x"},  // like terms combined
      {x - x, "0"},
      {x * 8 + z * 4 + 1, "8*x + 4*z + 1"},  // the constant last
      {(x + 3) - 5, "x - 2"},
      {-(x - z), "-x + z"},
      {2 * (x + z), "2*x + 2*z"},  // constants distribute
      {(x + 1) * (z + 2), "2*x + z + x*z + 2"},
      {z * x, "x*z"},  // factors sorted
      {x * 0, "0"},
      {x * 1, "x"},
      {(2 * x) * (3 * z), "6*x*z"},  // the coefficient first
      {x * 8 + (z - x * 8), "z"},
  });
}

TEST(SymSimplify, FloorDiv) {
  check({
      {floordiv(x * 8 + y, 8), "x"},  // y // 8 vanishes: y is in [0, 7]
      {floordiv(x * 8 + z, 8), "x + z // 8"},
      {floordiv(x * 16 + z * 2, 2), "8*x + z"},  // multiples of the divisor pulled out
      {floordiv(x, 1), "x"},
      {floordiv(y, 8), "0"},       // 0 <= y < 8
      {floordiv(y + 16, 8), "2"},  // one multiple of 8 covers every value
      {floordiv(floordiv(x, 4), 5), "x // 20"},
      {floordiv(x * 4 + 3, 8), "x // 2"},        // common factor 4: floor((4x + 3)/8) = floor(x/2)
      {floordiv(x * 6, 4), "(3*x) // 2"},        // common factor 2
      {floordiv(x + 9, 8), "(x + 1) // 8 + 1"},  // the constant reduced to [0, 8)
      {floordiv(x - 1, 8), "(x + 7) // 8 - 1"},
      {floordiv(n, 4), "n // 4"},
      {floordiv(mod(x, 16), 4), "(x % 16) // 4"},  // canonical: stays
      {floordiv(mod(x, 16), 32), "0"},
      // A low part bounded below the other terms' common factor with the divisor: a
      // flattened (r, y) index, 8*r + y over r-rows of 8, divided by 4 rows.
      {floordiv(x * 8 + y, 32), "x // 4"},
      {floordiv(x * 8 + z * 8 + y, 256), "(x + z) // 32"},
      {floordiv(x * 8 + z, 32), "(8*x + z) // 32"},  // z reaches 31: no split
  });
}

TEST(SymSimplify, Mod) {
  check({
      {mod(x * 8 + y, 8), "y"},      // y % 8 == y: y is in [0, 7]
      {mod(x * 8 + z, 8), "z % 8"},  // multiples of the divisor drop out
      {mod(x, 1), "0"},
      {mod(y, 8), "y"},
      {mod(y + 8, 8), "y"},                       // every value in [8, 15]: shifted
      {mod(mod(x, 24), 8), "x % 8"},              // (x % (a*b)) % b
      {mod(mod(x, 12), 8), "(x % 12) % 8"},       // 8 does not divide 12: stays
      {mod(mod(x, 8), 12), "x % 8"},              // x % 8 < 12
      {mod(floordiv(x, 4), 4), "(x % 16) // 4"},  // (x // b) % a == (x % (a*b)) // b
      {mod(x * 6, 4), "2*(x % 2)"},               // common factor 2, then 3*x == x modulo 2
      {mod(x * 9 + 3, 8), "(x + 3) % 8"},         // coefficient reduced modulo 8
      {mod(x * 4 + 3, 8), "4*(x % 2) + 3"},
      {mod(x - 1, 8), "(x + 7) % 8"},  // the constant reduced to [0, 8)
      {mod(n, 4), "n % 4"},
      {mod(-x, 8), "(-x) % 8"},
      {mod(x + mod(z, 16), 8), "(x + z) % 8"},  // z % 16 == z modulo 8
      {mod(x * 8 + y, 32), "y + 8*(x % 4)"},    // a low part in [0, 8) below 8*x
      {floordiv(x * 8 + y, 32) * 32 + mod(x * 8 + y, 32), "8*x + y"},  // and back together
  });
}

TEST(SymSimplify, SplitValuesRecombine) {
  check({
      {floordiv(x, 8) * 8 + mod(x, 8), "x"},
      {mod(x, 8) + floordiv(x, 8) * 8, "x"},
      {4 * (floordiv(x, 8) * 8) + 4 * mod(x, 8), "4*x"},  // with a common factor
      {floordiv(x, 8) * 8 + mod(x, 8) + z, "x + z"},
      {floordiv(x + z, 8) * 8 + mod(x + z, 8), "x + z"},
      {floordiv(mod(x, 16), 4) * 4 + mod(x, 4), "x % 16"},
      {floordiv(x, 16) * 16 + floordiv(mod(x, 16), 4) * 4 + mod(x, 4), "x"},
      {floordiv(floordiv(x, 3), 5) * 5 + mod(floordiv(x, 3), 5), "x // 3"},
      {floordiv(mod(x, 64), 16) * 4 + floordiv(mod(x, 16), 4), "(x % 64) // 4"},
      {floordiv(x, 8) * 8 + mod(x, 8) * 2,
       "8*(x // 8) + 2*(x % 8)"},  // not the halves of one value
      {floordiv(x, 8) * 8 + mod(z, 8), "8*(x // 8) + z % 8"},
  });
}

// Sizes known only at run time: s and t are size variables (2 .. kMaxSize), i a loop index
// over s, j one over s*t.
TEST(SymSimplify, DivisionBySizes) {
  const Expr s = size_var("s"), t = size_var("t");
  const Expr i = index_var("i", s), j = index_var("j", s * t);
  check({
      {floordiv(x * s + i, s), "x"},  // i < s: its bound
      {mod(x * s + i, s), "i"},
      {floordiv(x * s * 4 + z, s), "4*x + z // s"},  // multiples of s pulled out
      {floordiv(x * s * t + z * t, s * t), "x + (t*z) // (s*t)"},
      {mod(x * s + z, s), "z % s"},
      {mod(mod(z, s), s), "z % s"},
      {floordiv(floordiv(z, t), s), "z // (s*t)"},
      {floordiv(floordiv(j, t), s), "0"},  // j // (s*t), and j's bound is s*t
      {floordiv(x, constant(8)), "x // 8"},
      {floordiv(j, t) * t + mod(j, t), "j"},  // the halves of j split by t
      {3 * (floordiv(z, s) * s) + 3 * mod(z, s) + x, "x + 3*z"},
      // A run of four, 4*x + lane, inside one block of 4*s: the divisor's 4 takes the lane off.
      {floordiv(x * 4 + var("lane", {0, 3}), s * 4), "x // s"},
      {floordiv(x * 4 + var("lane", {0, 3}), s * 2), "(lane + 4*x) // (2*s)"},
  });
  EXPECT_EQ(to_c(floordiv(z, s)), "z / s");
  EXPECT_EQ(to_c(mod(n, s * 2)), "coil_mod(n, 2*s)");
  EXPECT_EQ(floordiv(z, s)->range(), (Range{0, 15}));
  EXPECT_EQ(mod(z, s)->range(), (Range{0, 31}));
  EXPECT_EQ(i->bound(), s);
  EXPECT_EQ(index_var("k", constant(8)), index_var("k", 8));
  EXPECT_EQ(evaluate(floordiv(z, s) + mod(z, t), {{z, 11}, {s, 3}, {t, 4}}), 3 + 3);
}

// Row-major offsets over loop indices of run-time (and constant) extents stay below the
// product of the extents, so the divisions that unravel them vanish; a flat index split by a
// size and scaled by others recombines.
TEST(SymSimplify, OffsetsOverLoopsOfSizes) {
  const Expr s1 = size_var("s1"), s2 = size_var("s2"), s3 = size_var("s3");
  const Expr x1 = index_var("x1", s1), x2 = index_var("x2", s2), x3 = index_var("x3", s3);
  const Expr c = index_var("c", 4);  // a constant extent among them
  const Expr inner = x3 + s3 * x2 + s2 * s3 * x1;
  check({
      {floordiv(inner, s1 * s2 * s3), "0"},
      {mod(inner, s1 * s2 * s3), to_string(inner)},
      {floordiv(x3 + s3 * x2 + s2 * s3 * c, 4 * s2 * s3), "0"},
      {floordiv(inner, s2 * s3), "x1"},  // not below: the multiples leave, the rest vanishes
      {floordiv(inner + s1 * s2 * s3, s1 * s2 * s3), "1"},
      {s1 * s2 * s3 * floordiv(z, s1) + s2 * s3 * mod(z, s1), "s2*s3*z"},
      // A constant extent among them: split by 64, scaled by sizes.
      {64 * s2 * s3 * floordiv(z, constant(64)) + s2 * s3 * mod(z, constant(64)), "s2*s3*z"},
  });
  // A flat index over [s1, 64, s2, s3] unravelled (a GPU pointwise kernel's) and raveled again
  // is the index itself.
  const Expr flat = index_var("i", s1 * 64 * s2 * s3);
  const Expr hw = s2 * s3;
  const Expr n = floordiv(flat, 64 * hw), ch = mod(floordiv(flat, hw), constant(64));
  const Expr h = mod(floordiv(flat, s3), s2), w = mod(flat, s3);
  EXPECT_EQ(n * 64 * hw + ch * hw + h * s3 + w, flat);
  EXPECT_EQ(floordiv(x3 + s3, s3 * 2), constant(0));  // x3 + s3 <= 2*s3 - 1
  // Not provable, left alone: a sum that may reach the divisor, a term that may be negative.
  EXPECT_EQ(floordiv(x3 + x2, s3)->kind(), Kind::FloorDiv);
  EXPECT_EQ(floordiv(s3 * x2 - x3 + s3, s2 * s3)->kind(), Kind::FloorDiv);
}

TEST(SymSimplify, MinMax) {
  check({
      {min(y, constant(10)), "y"},  // y <= 7
      {max(y, constant(10)), "10"},
      {min(x, x + 1), "x"},  // ordered by their difference
      {max(x, x + 1), "x + 1"},
      {min(x, x), "x"},
      {min(x, z), "min(x, z)"},
      {min(z, x), "min(x, z)"},
      {max(x - 1, c0), "max(x - 1, 0)"},
      {max(c0, x - 1), "max(x - 1, 0)"},  // a constant last
      {max(n, constant(-9)), "n"},
      {min(min(x, constant(3)), constant(5)), "min(x, 3)"},
  });
  EXPECT_EQ(min(z, x), min(x, z));
}

TEST(SymSimplify, RangesByIntervalArithmetic) {
  auto r = [](Expr e) { return e->range(); };
  EXPECT_EQ(r(x), (Range{0, 99}));
  EXPECT_EQ(r(x * -2 + 3), (Range{-195, 3}));  // a negative coefficient swaps the bounds
  EXPECT_EQ(r(n * z), (Range{-248, 248}));
  EXPECT_EQ(r(x - z), (Range{-31, 99}));
  EXPECT_EQ(r(floordiv(n, 4)), (Range{-2, 2}));
  EXPECT_EQ(r(floordiv(x, 8)), (Range{0, 12}));
  EXPECT_EQ(r(mod(n, 4)), (Range{0, 3}));
  EXPECT_EQ(r(mod(x, 8)), (Range{0, 7}));
  EXPECT_EQ(r(min(x, z)), (Range{0, 31}));
  EXPECT_EQ(r(max(n, c0)), (Range{0, 8}));
  EXPECT_EQ(r(min(n, constant(2))), (Range{-8, 2}));
  EXPECT_EQ(r(mod(x * 4 + 3, 8)), (Range{3, 7}));
  // Bounds saturate rather than wrap.
  Expr big = var("big", {0, INT64_MAX});
  EXPECT_EQ(r(big * 4), (Range{0, INT64_MAX}));
  EXPECT_EQ(r(big * 2 - var("big2", {0, INT64_MAX}) * 2), (Range{INT64_MIN, INT64_MAX}));
}

TEST(SymSimplify, MisuseIsAnInternalError) {
  EXPECT_THROW(floordiv(x, 0), coil::InternalError);
  EXPECT_THROW(mod(x, -8), coil::InternalError);
  EXPECT_THROW(constant(INT64_MAX) + constant(1), coil::InternalError);
  EXPECT_THROW(var("v", {3, 2}), coil::InternalError);
  EXPECT_THROW(x + Expr(), coil::InternalError);
  EXPECT_THROW(floordiv(nullptr, 2), coil::InternalError);
  EXPECT_THROW(floordiv(x, n), coil::InternalError);  // n may be 0 or negative
  EXPECT_THROW(mod(x, x), coil::InternalError);       // x may be 0
}
