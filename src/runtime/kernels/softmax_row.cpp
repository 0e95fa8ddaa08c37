#include "runtime/kernels/softmax_row.h"

#include <cmath>
#include <limits>

// softmax_row_vec's vectors cross calls (SLEEF's exp) only inside the functions compiled for
// their width, into which it is always inlined; GCC still warns about the generic template.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace coil {

namespace {

typedef float v16f __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));

extern "C" {
v16f Sleef_expf16_u10(v16f);
v8f Sleef_expf8_u10(v8f);
}

// A row whose maximum is -inf holds -inf and NaN alone (the maximum skips NaN): zeros when
// it is all -inf, the safe softmax's row with nothing to attend to. Returns whether it was.
bool zero_if_all_neg_inf(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (x[i] != -std::numeric_limits<float>::infinity()) return false;
  for (int64_t i = 0; i < n; ++i) x[i] = 0;
  return true;
}

// The row in three passes over x (the later two from cache while the row fits): the scaled
// values and their maximum, e = exp(x - max) and its sum, then e / sum. V vectors of W lanes;
// the tail past the last whole vector is scalar. The maximum skips NaN, whose exp then makes
// the sum and so the whole row NaN, as softmax's.
template <typename V, int W>
__attribute__((always_inline)) inline void softmax_row_vec(float* x, int64_t n, float scale,
                                                           V (*vexp)(V)) {
  const int64_t whole = n / W * W;
  const float inf = std::numeric_limits<float>::infinity();
  V vmx = V{} - inf, vscale = V{} + scale;
  float mx = -inf;
  for (int64_t i = 0; i < whole; i += W) {
    V v;
    __builtin_memcpy(&v, x + i, sizeof v);
    v *= vscale;
    __builtin_memcpy(x + i, &v, sizeof v);
    vmx = v > vmx ? v : vmx;
  }
  for (int k = 0; k < W; ++k) mx = vmx[k] > mx ? vmx[k] : mx;
  for (int64_t i = whole; i < n; ++i) {
    x[i] *= scale;
    mx = x[i] > mx ? x[i] : mx;
  }
  if (mx == -inf && zero_if_all_neg_inf(x, n)) return;
  V vsum = V{}, vm = V{} + mx;
  for (int64_t i = 0; i < whole; i += W) {
    V v;
    __builtin_memcpy(&v, x + i, sizeof v);
    v = vexp(v - vm);
    __builtin_memcpy(x + i, &v, sizeof v);
    vsum += v;
  }
  float sum = 0;
  for (int k = 0; k < W; ++k) sum += vsum[k];
  for (int64_t i = whole; i < n; ++i) sum += (x[i] = std::exp(x[i] - mx));
  const float inv = 1.0f / sum;
  const V vinv = V{} + inv;
  for (int64_t i = 0; i < whole; i += W) {
    V v;
    __builtin_memcpy(&v, x + i, sizeof v);
    v *= vinv;
    __builtin_memcpy(x + i, &v, sizeof v);
  }
  for (int64_t i = whole; i < n; ++i) x[i] *= inv;
}

__attribute__((target("avx512f"))) void softmax_row_avx512(float* x, int64_t n, float scale) {
  softmax_row_vec<v16f, 16>(x, n, scale, Sleef_expf16_u10);
}

__attribute__((target("avx2,fma"))) void softmax_row_avx2(float* x, int64_t n, float scale) {
  softmax_row_vec<v8f, 8>(x, n, scale, Sleef_expf8_u10);
}

// Without either: the same template with one lane, whose vector loops are the whole row.
typedef float v1f __attribute__((vector_size(4)));
v1f exp1(v1f v) { return v1f{std::exp(v[0])}; }
void softmax_row_scalar(float* x, int64_t n, float scale) {
  softmax_row_vec<v1f, 1>(x, n, scale, exp1);
}

}  // namespace

std::vector<SoftmaxRowVariant> softmax_row_variants() {
  __builtin_cpu_init();
  std::vector<SoftmaxRowVariant> v;
  if (__builtin_cpu_supports("avx512f")) v.push_back({"avx512", softmax_row_avx512});
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    v.push_back({"avx2", softmax_row_avx2});
  v.push_back({"scalar", softmax_row_scalar});
  return v;
}

namespace {
const auto kWidest = softmax_row_variants().front().fn;  // chosen once, when the library loads
}  // namespace

void softmax_row(float* x, int64_t n, float scale) { kWidest(x, n, scale); }

}  // namespace coil
