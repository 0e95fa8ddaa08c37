// Every implementation of the eager row softmax (runtime/kernels/softmax_row.h) this CPU can
// run, against float64: rows shorter than a vector, whole vectors and ragged tails, a scale,
// rows of -inf alone (zeros: the safe softmax), a NaN (its row NaN), and wide rows whose
// results below FLT_MIN are 0.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "runtime/kernels/softmax_row.h"

namespace coil {
namespace {

// From the float32 shifts x * scale - max, which the kernel rounds the same way.
std::vector<double> reference(const std::vector<float>& x, float scale) {
  float mx = -INFINITY;
  for (float v : x) mx = std::fmax(mx, v * scale);
  double sum = 0;
  std::vector<double> y;
  for (float v : x) sum += std::exp(double(v * scale - mx));
  for (float v : x) y.push_back(std::exp(double(v * scale - mx)) / sum);
  return y;
}

TEST(SoftmaxRow, EveryVariantMatchesFloat64) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-8, 8);
  const float inf = std::numeric_limits<float>::infinity();
  for (const SoftmaxRowVariant& v : softmax_row_variants()) {
    SCOPED_TRACE(v.name);
    for (int64_t n : {1, 5, 8, 16, 17, 40, 100}) {
      SCOPED_TRACE(n);
      std::vector<float> x(static_cast<size_t>(n));
      for (float& e : x) e = u(rng);
      if (n > 1) x[0] = -inf;  // one masked-out key
      std::vector<double> want = reference(x, 0.5f);
      v.fn(x.data(), n, 0.5f);
      for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(x[i], want[i], 2e-7 + 1e-6 * want[i]) << i;

      std::vector<float> masked(static_cast<size_t>(n), -inf);
      v.fn(masked.data(), n, 0.5f);
      for (float e : masked) EXPECT_EQ(e, 0.0f);

      std::vector<float> with_nan(static_cast<size_t>(n), 1.0f);
      with_nan.back() = std::numeric_limits<float>::quiet_NaN();
      v.fn(with_nan.data(), n, 0.5f);
      for (float e : with_nan) EXPECT_TRUE(std::isnan(e));
    }
  }
}

// Rows of deviation 30: about a fifth of the results below FLT_MIN, which are 0; the rest
// within 6 ulps of float64.
TEST(SoftmaxRow, WideRowsGiveZeroBelowFltMin) {
  std::mt19937 rng(12);
  std::normal_distribution<float> normal(0, 30);
  for (const SoftmaxRowVariant& v : softmax_row_variants()) {
    SCOPED_TRACE(v.name);
    double worst = 0;
    int zeroed = 0;
    for (int64_t n : {37, 300}) {
      for (int row = 0; row < 20; ++row) {
        std::vector<float> x(static_cast<size_t>(n));
        for (float& e : x) e = normal(rng);
        std::vector<double> want = reference(x, 1.0f);
        v.fn(x.data(), n, 1.0f);
        for (int64_t i = 0; i < n; ++i) {
          if (want[i] < 0x1p-126) {
            EXPECT_EQ(x[i], 0.0f) << want[i];
            zeroed += want[i] >= 0x1p-149;
          } else {
            worst = std::max(worst,
                             std::fabs(x[i] - want[i]) / std::ldexp(1.0, std::ilogb(want[i]) - 23));
          }
        }
      }
    }
    EXPECT_GT(zeroed, 300);
    EXPECT_LE(worst, 6.0);
  }
}

}  // namespace
}  // namespace coil
