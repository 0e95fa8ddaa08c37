// The softmax idiom's exact, subnormal-free form (softmaxExp / softmaxDiv, ir/value.h): wide
// rows whose results reach far below FLT_MIN still match float64 to a few units in the last
// place, subnormal results included (their unit is 2^-149), and the form is used only where
// nothing else reads the scaled values.
#include <cfloat>
#include <cmath>
#include <cstdlib>

#include "testing_stages.h"
#include "testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

// softmax along the last dim in float64 from the float32 shifts x - max, which the compiled
// kernel rounds the same way: the only differences left are exp's and the division's.
std::vector<double> reference(const Tensor& x) {
  const int64_t rows = x.size(0), cols = x.size(1);
  std::vector<double> v = values(x), out(v.size());
  for (int64_t i = 0; i < rows; ++i) {
    const double* row = v.data() + i * cols;
    float max = -INFINITY;
    for (int64_t j = 0; j < cols; ++j) max = std::fmax(max, static_cast<float>(row[j]));
    double sum = 0;
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(static_cast<double>(float(row[j]) - max));
    for (int64_t j = 0; j < cols; ++j)
      out[i * cols + j] = std::exp(static_cast<double>(float(row[j]) - max)) / sum;
  }
  return out;
}

// The error of `got` in units of the last place of the float32 result nearest `want`.
double ulps(double got, double want) {
  double ulp = want < FLT_MIN ? 0x1p-149 : std::ldexp(1.0, std::ilogb(want) - 23);
  return std::fabs(got - want) / ulp;
}

class SoftmaxSubnormals : public ::testing::Test {
 protected:
  void SetUp() override { compiler_reset(); }
};

}  // namespace

// Rows of deviation 30 put about a fifth of the results below FLT_MIN. 300 columns: vector
// bodies and scalar remainders; 80 rows: the parallel loop.
TEST_F(SoftmaxSubnormals, WideRowsMatchFloat64IncludingSubnormalResults) {
  manual_seed(3);
  Tensor x = randn({80, 300}) * 30.0;
  auto cf = compile([](const Tensor& t) { return softmax(t, -1); });
  std::vector<double> got = values(cf(x)), want = reference(x);
  double worst = 0, worst_few_bits = 0;
  int64_t subnormal = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, ulps(got[i], want[i]));
    if (want[i] < 0x1p-139) worst_few_bits = std::max(worst_few_bits, ulps(got[i], want[i]));
    subnormal += want[i] < FLT_MIN && want[i] >= 0x1p-149;
  }
  EXPECT_GT(subnormal, 1000);  // the test reaches the subnormal path
  // exp's 2 ulps, the sum's rounding and the division's, relative to the result; below 2^-139
  // a result has at most 10 significant bits, and those errors stay far under half its unit.
  EXPECT_LE(worst, 6.0);
  EXPECT_LE(worst_few_bits, 0.51);
}

// Results that round to 0, to the smallest subnormal and to FLT_MIN, from shifts placed on
// those boundaries; -inf and NaN rows behave as eager's.
TEST_F(SoftmaxSubnormals, BoundariesInfinitiesAndNan) {
  const float inf = INFINITY, nan = NAN;
  Tensor x = tensor<float>({0,    -87.3f, -87.34f, -103.2f, -103.97f, -104.4f, -110, -inf,  //
                            5,    4,      -inf,    -inf,    -inf,     -inf,    -inf, -inf,  //
                            -inf, -inf,   -inf,    -inf,    -inf,     -inf,    -inf, -inf,  //
                            1,    nan,    2,       3,       4,        5,       6,    7},
                           Shape{4, 8});
  auto f = [](const Tensor& t) { return softmax(t, 1); };
  std::vector<double> got = values(compile(f)(x)), want = values(f(x));
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(i);
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i]));
    } else {
      EXPECT_LE(ulps(got[i], want[i]), 2.0) << got[i] << " against " << want[i];
    }
  }
}

// Written out by hand, the idiom gets the same form; when the program also returns the
// exponentials (or their sum), the scaled values would be seen, so it keeps exp and div.
TEST_F(SoftmaxSubnormals, OnlyWhereNothingElseReadsTheScaledValues) {
  auto by_hand = [](const Tensor& t) {
    Tensor e = exp(t - amax(t, {1}, true));
    return e / sum(e, {1}, true);
  };
  auto with_exp = [](const Tensor& t) {
    Tensor e = exp(t - amax(t, {1}, true));
    return std::vector<Tensor>{e / sum(e, {1}, true), e};
  };
  Tensor x = randn({16, 64}) * 30.0;
  expect_close(compile(by_hand)(x), reference(x), x.sizes(), 1e-5, 1e-30);
  std::vector<Tensor> got = compile(with_exp)(x), want = with_exp(x);
  expect_close(got[0], values(want[0]), x.sizes(), 1e-5, 1e-30);
  expect_close(got[1], values(want[1]), x.sizes(), 1e-5, 1e-30);

  using testing_stages::lowered_and_scheduled;
  const std::string head =
      R"(def forward(self, x: "f32[4, 8][8, 1]cpu"):
    amax: "f32[4, 1][1, 1]cpu" = coil.amax(x, [1], True)
    sub: "f32[4, 8][8, 1]cpu" = coil.sub(x, amax)
    exp: "f32[4, 8][8, 1]cpu" = coil.exp(sub)
    sum_1: "f32[4, 1][1, 1]cpu" = coil.sum(exp, [1], True)
    div: "f32[4, 8][8, 1]cpu" = coil.div(exp, sum_1)
)";
  std::string idiom = ir::to_string(lowered_and_scheduled(head + "    return (div,)\n").program);
  std::string exp_too =
      ir::to_string(lowered_and_scheduled(head + "    return (div, exp)\n").program);
  std::string sum_too =
      ir::to_string(lowered_and_scheduled(head + "    return (div, sum_1)\n").program);
  EXPECT_NE(idiom.find("softmaxDiv(softmaxExp("), std::string::npos) << idiom;
  for (const std::string& p : {exp_too, sum_too}) {
    EXPECT_EQ(p.find("softmax"), std::string::npos) << p;
    EXPECT_NE(p.find("div(exp("), std::string::npos) << p;
  }
}

// float64 keeps exp and div: its subnormals start at 2^-1022, far below any row's reach.
TEST_F(SoftmaxSubnormals, Float64KeepsExpAndDiv) {
  std::string p = ir::to_string(testing_stages::lowered_and_scheduled(
                                    R"(def forward(self, x: "f64[4, 8][8, 1]cpu"):
    amax: "f64[4, 1][1, 1]cpu" = coil.amax(x, [1], True)
    sub: "f64[4, 8][8, 1]cpu" = coil.sub(x, amax)
    exp: "f64[4, 8][8, 1]cpu" = coil.exp(sub)
    sum_1: "f64[4, 1][1, 1]cpu" = coil.sum(exp, [1], True)
    div: "f64[4, 8][8, 1]cpu" = coil.div(exp, sum_1)
    return (div,)
)")
                                    .program);
  EXPECT_EQ(p.find("softmax"), std::string::npos) << p;
}

// The prelude's forms for narrower vectors (8 lanes with AVX2, 4 without), built with the
// wider instructions turned off: the same results, and `any`/`all` (hany, hall) as eager's.
TEST_F(SoftmaxSubnormals, NarrowerVectorsGiveTheSameResults) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2")) GTEST_SKIP() << "the CPU has no AVX2";
  const char* old = std::getenv("COIL_CXXFLAGS");
  const std::string saved = old ? old : "";
  manual_seed(5);
  Tensor x = randn({24, 100}) * 30.0;
  auto f = [](const Tensor& t) {
    return std::vector<Tensor>{softmax(t, 1), any(t > 80.0, {1}), all(t > -80.0, {1})};
  };
  std::vector<Tensor> want = f(x);
  for (const char* flags : {"-mno-avx512f", "-mno-avx512f -mno-avx2"}) {
    SCOPED_TRACE(flags);
    setenv("COIL_CXXFLAGS", flags, 1);
    compiler_reset();
    std::vector<Tensor> got = compile(f)(x);
    std::vector<double> g = values(got[0]), w = reference(x);
    double worst = 0;
    for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, ulps(g[i], w[i]));
    EXPECT_LE(worst, 6.0);
    EXPECT_EQ(values(got[1]), values(want[1]));
    EXPECT_EQ(values(got[2]), values(want[2]));
  }
  if (old)
    setenv("COIL_CXXFLAGS", saved.c_str(), 1);
  else
    unsetenv("COIL_CXXFLAGS");
  compiler_reset();
}
