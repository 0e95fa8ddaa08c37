// The vector helpers are always inlined into the functions compiled for their width; GCC
// still warns about the generic templates' vector arguments.
#pragma GCC diagnostic ignored "-Wpsabi"

#include "runtime/kernels/softmax_row.h"

#include "runtime/kernels/exp_poly.h"

#include <cmath>
#include <limits>

namespace coil {

namespace {

typedef float v16f __attribute__((vector_size(64)));
typedef int v16i __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));
typedef int v8i __attribute__((vector_size(32)));
typedef float v1f __attribute__((vector_size(4)));
typedef int v1i __attribute__((vector_size(4)));

// A row whose scaled maximum is -inf holds -inf and NaN alone once scaled (the maximum skips
// NaN): zeros when it is all -inf, the safe softmax's row with nothing to attend to. Returns
// whether it was.
bool zero_if_all_neg_inf(float* x, int64_t n, float scale) {
  for (int64_t i = 0; i < n; ++i)
    if (x[i] * scale != -std::numeric_limits<float>::infinity()) return false;
  for (int64_t i = 0; i < n; ++i) x[i] = 0;
  return true;
}

// 2^64 e^s for s = x - max(x) <= 0, never subnormal: e^s itself is below FLT_MIN for
// s < -87.3, and each subnormal operand or result costs an x86 core a microcode assist (a
// product's rows put a sixth of their exps there; ir/value.h). s <= -104.5 is taken as -104.5:
// the result, e / sum with sum >= 2^64, is 0 there either way. The polynomial is the generated
// code's exp (codegen/cpp_prelude.cpp): 2 ulp. NaN stays NaN through the clamp and the
// arithmetic, with no select for it.
template <typename V, typename I>
__attribute__((always_inline)) inline V exp_scaled(V s) {
  V nf, p = exp_parts(s < -104.5f ? V{} - 104.5f : s, nf);
  return p * (V)((__builtin_convertvector(nf, I) + 191) << 23);
}
// Helpers of softmax_row_vec, inlined into each ISA's copy even without optimisation (a
// lambda would be a function of the default ISA, taking wide vectors by another ABI).
template <typename V>
__attribute__((always_inline)) inline V scaled(const float* p, V scale) {
  V v;
  __builtin_memcpy(&v, p, sizeof v);
  return v * scale;
}
template <typename V>
__attribute__((always_inline)) inline V max_of(V a, V b) {  // b where a is NaN
  return a > b ? a : b;
}
float exp_scaled(float s) {
  const double c = s < -104.5f ? -104.5 : static_cast<double>(s);  // NaN stays NaN
  return static_cast<float>(std::ldexp(std::exp(c), 64));
}

// The row in three passes over x (the later two from cache while the row fits): the maximum
// of the scaled values, e = 2^64 exp(x * scale - max) and its sum, then e / sum. The first
// pass only reads (the second scales again, the same rounding): a store less per vector. V vectors
// of W lanes (I their integer twin); the tail past the last whole vector is scalar. The maximum
// skips NaN, whose exp then makes the sum and so the whole row NaN, as softmax's. In a row
// whose results reach below FLT_MIN (its smallest e under sum * 2^-126) those results are 0
// (softmax_row.h says why).
template <typename V, typename I, int W>
__attribute__((always_inline)) inline void softmax_row_vec(float* x, int64_t n, float scale) {
  const int64_t whole = n / W * W;
  const float inf = std::numeric_limits<float>::infinity();
  const V vscale = V{} + scale;
  // Four chains, so that no step waits on the last one's max (256-float rows: faster with AVX2,
  // no change with AVX-512).
  V m0 = V{} - inf, m1 = m0, m2 = m0, m3 = m0;
  int64_t i = 0;
  for (; i + 4 * W <= whole; i += 4 * W) {
    m0 = max_of(scaled(x + i, vscale), m0);
    m1 = max_of(scaled(x + i + W, vscale), m1);
    m2 = max_of(scaled(x + i + 2 * W, vscale), m2);
    m3 = max_of(scaled(x + i + 3 * W, vscale), m3);
  }
  for (; i < whole; i += W) m0 = max_of(scaled(x + i, vscale), m0);
  const V vmx = max_of(max_of(m0, m1), max_of(m2, m3));
  float mx = -inf;
  for (int k = 0; k < W; ++k) mx = vmx[k] > mx ? vmx[k] : mx;
  for (int64_t i = whole; i < n; ++i) {
    const float v = x[i] * scale;
    mx = v > mx ? v : mx;
  }
  if (mx == -inf && zero_if_all_neg_inf(x, n, scale)) return;
  V vsum = V{}, vmin = V{} + inf, vm = V{} + mx;
  for (int64_t i = 0; i < whole; i += W) {
    V v;
    __builtin_memcpy(&v, x + i, sizeof v);
    v = exp_scaled<V, I>(v * vscale - vm);
    __builtin_memcpy(x + i, &v, sizeof v);
    vsum += v;
    vmin = v < vmin ? v : vmin;
  }
  float sum = 0, smallest = inf;
  for (int k = 0; k < W; ++k) {
    sum += vsum[k];
    smallest = std::fmin(smallest, vmin[k]);
  }
  for (int64_t i = whole; i < n; ++i) {
    sum += (x[i] = exp_scaled(x[i] * scale - mx));
    smallest = std::fmin(smallest, x[i]);
  }
  const float inv = 1.0f / sum, bound = sum * 0x1p-126f;
  const V vinv = V{} + inv;
  if (!(smallest < bound)) {  // every result normal (or the row NaN)
    for (int64_t i = 0; i < whole; i += W) {
      V v;
      __builtin_memcpy(&v, x + i, sizeof v);
      v *= vinv;
      __builtin_memcpy(x + i, &v, sizeof v);
    }
  } else {
    const V vbound = V{} + bound;
    for (int64_t i = 0; i < whole; i += W) {
      V v;
      __builtin_memcpy(&v, x + i, sizeof v);
      v = (v < vbound ? V{} : v) * vinv;  // no multiply that would make a subnormal
      __builtin_memcpy(x + i, &v, sizeof v);
    }
  }
  for (int64_t i = whole; i < n; ++i) x[i] = x[i] < bound ? 0.0f : x[i] * inv;
}

__attribute__((target("avx512f"))) void softmax_row_avx512(float* x, int64_t n, float scale) {
  softmax_row_vec<v16f, v16i, 16>(x, n, scale);
}

__attribute__((target("avx2,fma"))) void softmax_row_avx2(float* x, int64_t n, float scale) {
  softmax_row_vec<v8f, v8i, 8>(x, n, scale);
}

// Without either: the same template with one lane, whose vector loops are the whole row.
void softmax_row_scalar(float* x, int64_t n, float scale) {
  softmax_row_vec<v1f, v1i, 1>(x, n, scale);
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
