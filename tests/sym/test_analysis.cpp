// Reading expressions: constant_stride, divisor_of, free_vars, depends_on, substitute and
// evaluate (Python's floor semantics on negative values).
#include <gtest/gtest.h>

#include "coil/error.h"
#include "sym/expr.h"

using namespace coil::sym;

namespace {

const Expr x = index_var("x", 100);
const Expr y = index_var("y", 8);
const Expr z = index_var("z", 32);
const Expr n = var("n", {-8, 8});

// The stride of e along v, or -999 when constant_stride says it is not affine.
int64_t const_stride(Expr e, Expr v) {
  int64_t s = -999;
  return constant_stride(e, v, &s) ? s : -999;
}

}  // namespace

TEST(SymAnalysis, ConstantStride) {
  EXPECT_EQ(const_stride(x * 8 + y, y), 1);
  EXPECT_EQ(const_stride(x * 8 + y, x), 8);
  EXPECT_EQ(const_stride(x * 8 + y, z), 0);               // not used
  EXPECT_EQ(const_stride(floordiv(x * 8 + y, 8), y), 0);  // y // 8 vanishes
  EXPECT_EQ(const_stride(mod(y, 8), y), 1);               // y % 8 is y
  EXPECT_EQ(const_stride(3 - x * 2, x), -2);
  EXPECT_EQ(const_stride(floordiv(x, 8), x), -999);
  EXPECT_EQ(const_stride(mod(z, 8), z), -999);
  EXPECT_EQ(const_stride(x * z, x), -999);
  EXPECT_EQ(const_stride(min(x, constant(5)), x), -999);
  int64_t untouched = 42;
  EXPECT_FALSE(constant_stride(floordiv(x, 8), x, &untouched));
  EXPECT_EQ(untouched, 42);
}

// Each verdict checked against the values: a "same" index takes one value over every aligned
// run of four, and a "not same" one differs within some run.
TEST(SymAnalysis, SameOverAlignedRuns) {
  const Expr i = index_var("i", 32 * 64 * 3136);
  const Expr s = var("s", {1, 1 << 20});
  struct Case {
    Expr e;
    bool same;
  };
  for (const Case& c :
       {Case{floordiv(mod(i, 200704), 3136), true},  // a channel, NCHW
        Case{floordiv(i, 8), true}, Case{mod(floordiv(i, 4), 7) * 3 + 1, true},
        Case{constant(5), true}, Case{floordiv(mod(i, 200700), 3135), false},  // planes of odd size
        Case{mod(i, 64), false},                                               // a channel, NHWC
        Case{floordiv(i, 2), false},
        Case{floordiv(i, s * 4), true},      // a run-time divisor four divides
        Case{floordiv(i, s * 2), false}}) {  // and one it may not
    SCOPED_TRACE(to_string(c.e));
    EXPECT_EQ(same_over_aligned_runs(c.e, i, 4), c.same);
    bool differs = false;
    for (int64_t q = 0; q < 60000 && !differs; q += 7)
      for (int64_t j = 1; j < 4; ++j) {
        std::unordered_map<Expr, int64_t> at = {{i, 4 * q}, {s, 3}},
                                          next = {{i, 4 * q + j}, {s, 3}};
        differs = differs || evaluate(c.e, at) != evaluate(c.e, next);
      }
    if (c.same) {
      EXPECT_FALSE(differs);
    }
  }
}

TEST(SymAnalysis, DivisorOf) {
  EXPECT_EQ(divisor_of(x * 8 + z * 4), 4);
  EXPECT_EQ(divisor_of(x * 8 + z * 4 + 2), 2);
  EXPECT_EQ(divisor_of(x * 6 * z), 6);
  EXPECT_EQ(divisor_of(x), 1);
  EXPECT_EQ(divisor_of(floordiv(x * 8, 3)), 1);
  EXPECT_EQ(divisor_of(mod(x * 8, 12)), 4);
  EXPECT_EQ(divisor_of(min(x * 4, z * 8)), 4);
  EXPECT_EQ(divisor_of(constant(-6)), 6);
  EXPECT_EQ(divisor_of(constant(0)), 0);
}

TEST(SymAnalysis, FreeVarsAndDependsOn) {
  Expr e = z + x * y + mod(x, 3);
  std::vector<Expr> want{x, y, z};
  EXPECT_EQ(free_vars(e), want);
  EXPECT_EQ(free_vars(constant(3)), std::vector<Expr>{});
  Expr wide = var("x", {0, 200});
  std::vector<Expr> by_range{x, wide};  // same name: by range
  EXPECT_EQ(free_vars(wide + x), by_range);
  EXPECT_TRUE(depends_on(e, y));
  EXPECT_FALSE(depends_on(e, n));
  EXPECT_FALSE(depends_on(floordiv(x * 8 + y, 8), y));  // simplified away
  EXPECT_THROW(depends_on(e, x + 1), coil::InternalError);
}

TEST(SymAnalysis, SubstituteResimplifies) {
  EXPECT_EQ(to_string(substitute(x * 8 + z, {{z, y}})), "8*x + y");
  EXPECT_EQ(to_string(substitute(floordiv(x * 8 + z, 8), {{z, y}})), "x");
  EXPECT_EQ(to_string(substitute(x + z, {{x, z}, {z, x}})), "x + z");  // simultaneous
  EXPECT_EQ(to_string(substitute(mod(x, 8), {{x, y * 2}})), "2*(y % 4)");
  EXPECT_EQ(substitute(x + z, {}), x + z);
  EXPECT_THROW(substitute(x, {{x + 1, z}}), coil::InternalError);
}

TEST(SymAnalysis, EvaluateUsesFloorSemantics) {
  EXPECT_EQ(evaluate(floordiv(n, 4), {{n, -5}}), -2);
  EXPECT_EQ(evaluate(mod(n, 4), {{n, -5}}), 3);
  EXPECT_EQ(evaluate(x * 8 + y - 3, {{x, 2}, {y, 5}}), 18);
  EXPECT_EQ(evaluate(min(x, z), {{x, 2}, {z, 1}}), 1);
  EXPECT_THROW(evaluate(x + y, {{x, 1}}), coil::InternalError);
}
