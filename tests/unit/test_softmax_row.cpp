// Every implementation of the eager row softmax (runtime/kernels/softmax_row.h) this CPU can
// run, against float64: rows shorter than a vector, whole vectors and ragged tails, a scale,
// rows of -inf alone (zeros: the safe softmax), and a NaN (its row NaN).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "runtime/kernels/softmax_row.h"

namespace coil {
namespace {

std::vector<double> reference(const std::vector<float>& x, float scale) {
  double mx = -INFINITY, sum = 0;
  for (float v : x) mx = std::fmax(mx, double(v * scale));
  std::vector<double> y;
  for (float v : x) sum += std::exp(double(v * scale) - mx);
  for (float v : x) y.push_back(std::exp(double(v * scale) - mx) / sum);
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

}  // namespace
}  // namespace coil
