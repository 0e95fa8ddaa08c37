// Test helpers: random inputs of awkward shapes and layouts, float64 references computed by
// plain loops in the test, and error-message checks.
#pragma once

#include <coil/coil.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace coil::testing {

// Uniform values in [lo, hi) of any dtype (integers and bool rounded down from the draw).
inline Tensor random(const Shape& sizes, DType dtype = kFloat32, double lo = -2, double hi = 2) {
  Tensor u = rand(sizes, kFloat64) * (hi - lo) + lo;
  if (is_integral(dtype, true)) u = floor(u);
  return u.to(dtype);
}

// The same values in a non-contiguous layout (reversed dim order in memory), so kernels that
// assume contiguity fail.
inline Tensor noncontiguous(const Tensor& t) {
  if (t.dim() < 2) {
    Tensor big = empty({t.numel() * 2}, t.dtype());
    Tensor v = big.slice(0, 0, std::nullopt, 2);
    if (t.dim() == 1) {
      v.copy_(t);
      return v;
    }
    return t;
  }
  Shape rev(t.sizes().rbegin(), t.sizes().rend());
  Shape perm;
  for (int64_t d = t.dim() - 1; d >= 0; --d) perm.push_back(d);
  Tensor storage = empty(rev, t.dtype());
  Tensor v = storage.permute(perm);
  v.copy_(t);
  return v;
}

// All elements as doubles, in logical (row-major) order.
inline std::vector<double> values(const Tensor& t) { return t.to_vector_double(); }

// Row-major linear index -> multi-index for `sizes`.
inline Shape unravel(int64_t i, const Shape& sizes) {
  Shape idx(sizes.size());
  for (size_t d = sizes.size(); d-- > 0;) {
    idx[d] = sizes[d] ? i % sizes[d] : 0;
    if (sizes[d]) i /= sizes[d];
  }
  return idx;
}

// Expects `actual` to have `sizes` and match `expected` (row-major) within tolerance.
inline void expect_close(const Tensor& actual, const std::vector<double>& expected,
                         const Shape& sizes, double rtol = 1e-5, double atol = 1e-6) {
  ASSERT_EQ(actual.sizes(), sizes);
  std::vector<double> got = values(actual);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    double e = expected[i], g = got[i];
    if (std::isnan(e)) {
      EXPECT_TRUE(std::isnan(g)) << "at " << i << ": expected nan, got " << g;
    } else if (std::isinf(e)) {
      EXPECT_EQ(g, e) << "at " << i;
    } else {
      EXPECT_NEAR(g, e, atol + rtol * std::fabs(e)) << "at flat index " << i;
    }
    if (::testing::Test::HasFailure()) return;  // one mismatch is enough to read
  }
}

// Tolerances that fit a dtype's precision.
inline double rtol_for(DType t) {
  switch (t) {
    case kFloat16:
      return 2e-3;
    case kBFloat16:
      return 1.6e-2;
    case kFloat32:
      return 1e-5;
    default:
      return 1e-12;
  }
}

const std::vector<DType> kFloatTypes = {kFloat32, kFloat64, kFloat16, kBFloat16};

struct Tol {
  double rtol, atol;
};
// For results of magnitude about 1: the absolute tolerance follows the dtype's precision too.
inline Tol tol_for(DType t) {
  double r = rtol_for(t);
  return {r, t == kFloat64 ? 1e-12 : r};
}

// What `body` logs under COIL_LOGS=`logs` (the compiled functions are reset before and after:
// the log settings are read again).
template <typename F>
inline std::string log_of(const char* logs, F&& body) {
  setenv("COIL_LOGS", logs, 1);
  char path[] = "/tmp/coil_log_XXXXXX";
  int fd = mkstemp(path);
  close(fd);
  setenv("COIL_LOG_FILE", path, 1);
  compiler_reset();
  body();
  unsetenv("COIL_LOGS");
  unsetenv("COIL_LOG_FILE");
  compiler_reset();
  std::FILE* f = std::fopen(path, "r");
  std::string text;
  char chunk[1 << 16];
  for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, f)) > 0;) text.append(chunk, n);
  std::fclose(f);
  std::remove(path);
  return text;
}

}  // namespace coil::testing

// Expects `stmt` to throw coil::Error whose message contains `substr`.
#define EXPECT_COIL_ERROR(stmt, substr)                                \
  do {                                                                 \
    try {                                                              \
      stmt;                                                            \
      ADD_FAILURE() << "expected coil::Error from: " #stmt;            \
    } catch (const ::coil::Error& e) {                                 \
      EXPECT_NE(std::string(e.what()).find(substr), std::string::npos) \
          << "message was: " << e.what();                              \
    }                                                                  \
  } while (0)
