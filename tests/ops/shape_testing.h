// Helpers shared by the shape, indexing and view op tests: inputs of every dtype whose values
// each dtype holds exactly, and float64 references built position by position.
#pragma once

#include <functional>

#include "testing.h"

namespace coil::testing {

// Data movement is dtype-agnostic, so it is tested on every dtype, exactly.
inline const std::vector<DType> kAllDTypes = {kBool,    kInt8,     kUInt8,   kInt32,  kInt64,
                                              kFloat16, kBFloat16, kFloat32, kFloat64};

// Random values within the dtype's range (bool: 0/1).
inline Tensor sample(const Shape& sizes, DType dtype) {
  if (dtype == kBool) return random(sizes, kBool, 0, 2);
  if (dtype == kUInt8) return random(sizes, kUInt8, 0, 250);
  if (is_integral(dtype)) return random(sizes, dtype, -120, 120);
  return random(sizes, dtype, -2, 2);
}

inline int64_t ravel(const Shape& idx, const Shape& sizes) {
  int64_t flat = 0;
  for (size_t d = 0; d < sizes.size(); ++d) flat = flat * sizes[d] + idx[d];
  return flat;
}

// A tensor's values read once, addressed by multi-index: the reference side of a test.
struct Values {
  explicit Values(const Tensor& t) : v(values(t)), sizes(t.sizes()) {}
  double at(const Shape& idx) const { return v[static_cast<size_t>(ravel(idx, sizes))]; }
  std::vector<double> v;
  Shape sizes;
};

// The expected values of a tensor of `sizes`, f giving the value at each multi-index.
inline std::vector<double> build(const Shape& sizes, const std::function<double(const Shape&)>& f) {
  std::vector<double> out;
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  for (int64_t i = 0; i < n; ++i) out.push_back(f(unravel(i, sizes)));
  return out;
}

// Data movement must reproduce values bit for bit (NaN never occurs in these inputs).
inline void expect_exact(const Tensor& actual, DType dtype, const std::vector<double>& expected,
                         const Shape& sizes) {
  EXPECT_EQ(actual.dtype(), dtype);
  expect_close(actual, expected, sizes, 0, 0);
}

}  // namespace coil::testing
