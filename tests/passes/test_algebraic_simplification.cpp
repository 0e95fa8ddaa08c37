// Algebraic simplification: each rule, its guards, and the special values (NaN, infinities,
// signed zeros) every rule must preserve.
#include "pass_testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

const char* kHead = "def forward(self, x: \"f32[4, 6][6, 1]cpu\", y: \"f32[6][1]cpu\"):\n";

TEST(AlgebraicSimplification, RewritesPowers) {
  expect_pass(run_algebraic_simplification,
              std::string(kHead) +
                  "    a = coil.pow(x, 2)\n"
                  "    b = coil.pow(x, 0.5)\n"
                  "    c = coil.pow(y, -1)\n"
                  "    return (a, b, c)\n",
              std::string(kHead) +
                  "    mul = coil.mul(x, x)\n"
                  "    sqrt = coil.sqrt(x)\n"
                  "    reciprocal = coil.reciprocal(y)\n"
                  "    return (mul, sqrt, reciprocal)\n");
  expect_pass(run_algebraic_simplification,
              R"(def forward(self, i: "i64[5][1]cpu"):
    two: "i64[1][1]cpu" = coil.constant([2])
    a = coil.pow(i, two)
    return (a,)
)",
              R"(def forward(self, i: "i64[5][1]cpu"):
    mul = coil.mul(i, i)
    return (mul,)
)");
}

TEST(AlgebraicSimplification, RewritesNegations) {
  expect_pass(run_algebraic_simplification,
              std::string(kHead) +
                  "    s = coil.sin(x)\n"
                  "    a = coil.neg(s)\n"
                  "    b = coil.neg(a)\n"
                  "    c = coil.mul(b, -1)\n"
                  "    d = coil.mul(-1.0, y)\n"
                  "    return (c, d)\n",
              std::string(kHead) +
                  "    s = coil.sin(x)\n"
                  "    neg = coil.neg(s)\n"
                  "    neg_1 = coil.neg(y)\n"
                  "    return (neg, neg_1)\n");
}

TEST(AlgebraicSimplification, KeepsRewritesThatWouldChangeDtypeOrSizes) {
  expect_no_change(run_algebraic_simplification,
                   R"(def forward(self, i: "i64[3][1]cpu", b: "b8[3][1]cpu", y: "f32[6][1]cpu"):
    twos: "f32[2, 6][6, 1]cpu" = coil.constant([2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0])
    a = coil.pow(i, 2.0)
)"                                                // a float exponent makes it float32
                   "    c = coil.pow(i, 0.5)\n"   // likewise
                   "    d = coil.mul(b, -1)\n"    // bool * int is int64
                   "    e = coil.pow(y, twos)\n"  // the exponent broadcasts y to [2, 6]
                   "    f = coil.pow(i, 3)\n"     // no rule for 3
                   "    return (a, c, d, e, f)\n");
}

// neg(neg(x)) would return the program's input itself.
TEST(AlgebraicSimplification, NeverMakesAResultAliasAnInput) {
  expect_no_change(run_algebraic_simplification, std::string(kHead) +
                                                     "    a = coil.neg(y)\n"
                                                     "    b = coil.neg(a)\n"
                                                     "    return (b,)\n");
}

// No rule may change a NaN, an infinity or the sign of a zero. (x ** 0.5 at -0.0 and -inf
// follows PyTorch, which computes it as sqrt: those two are left out here.)
TEST(AlgebraicSimplification, PreservesSpecialValues) {
  const char* text =
      R"(def forward(self, x: "f64[8][1]cpu"):
    a = coil.pow(x, 2)
    b = coil.pow(x, -1)
    n = coil.neg(x)
    c = coil.neg(n)
    d = coil.mul(x, -1)
    e = coil.mul(c, 1)
    return (a, b, d, e)
)";
  Graph before = parse_graph(text), after = parse_graph(text);
  EXPECT_TRUE(run_algebraic_simplification(after));
  Tensor x = tensor(std::vector<double>{NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-310, -3.5, 1e200});
  std::vector<Tensor> want = interpret(before, {x}), got = interpret(after, {x});
  for (size_t i = 0; i < want.size(); ++i) {
    std::vector<double> w = values(want[i]), g = values(got[i]);
    for (size_t k = 0; k < w.size(); ++k) {
      SCOPED_TRACE("result " + std::to_string(i) + ", element " + std::to_string(k));
      if (std::isnan(w[k])) {
        EXPECT_TRUE(std::isnan(g[k]));
      } else {
        EXPECT_EQ(g[k], w[k]);
        EXPECT_EQ(std::signbit(g[k]), std::signbit(w[k]));
      }
    }
  }
}

}  // namespace
