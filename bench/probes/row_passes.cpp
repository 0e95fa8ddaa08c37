// What holds a row kernel (softmax over 2048 x 2048 float32, coil's generated structure: a pass
// for the row's maximum, one for exp(x - max) into a row buffer with its sum, one to scale)
// under the copy ceiling? Variants, each over 8 rotating inputs and one reused output:
//   coil      the generated code's structure: one vector accumulator per reduction
//   split     four independent accumulators for the maximum, two for the sum (the
//             reductions' loop-carried chains are the compare-and-select's latency)
//   lean      split, with an exp of fewer instructions (no NaN select, the clamp one max):
//             coil's generated code since 2026-11-25
//   lean+pf   lean, and each line of the next row prefetched (into L1, or with pf2 into L2)
//             during the exp pass or the division pass, so that memory works while the core
//             computes this row
// HOT=1 reads row 0 for every row, HOT2=1 also writes row 0 (the arithmetic alone).
// With a plain copy at the same sizes for the ceiling.
//   g++ -O3 -march=native -fopenmp bench/probes/row_passes.cpp -o /tmp/rp && /tmp/rp
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define COIL_VEC 16
typedef float vf32 __attribute__((vector_size(COIL_VEC * 4)));
typedef int vi32 __attribute__((vector_size(COIL_VEC * 4)));

// As in codegen/cpp_prelude.cpp.
static inline vf32 vload(const float* p) {
  vf32 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
static inline void vstore(float* p, vf32 v) { __builtin_memcpy(p, &v, sizeof v); }
static inline vf32 vsplat(float x) { return (vf32){} + x; }
static inline vf32 vselect(vi32 m, vf32 a, vf32 b) { return m ? a : b; }
static inline vf32 vmax(vf32 a, vf32 b) { return ((a > b) | (a != a)) ? a : b; }
static inline float hsum(vf32 v) {
  float s = 0;
  for (int k = 0; k < COIL_VEC; ++k) s += v[k];
  return s;
}
static inline float hmax(vf32 v) {
  float s = v[0];
  for (int k = 1; k < COIL_VEC; ++k) s = v[k] > s || v[k] != v[k] ? v[k] : s;
  return s;
}
static inline vf32 vexp_parts(vf32 c, vf32& nf) {
  nf = (c * 1.44269502f + 12582912.0f) - 12582912.0f;
  vf32 r = (c - nf * 0.693359375f) - nf * -2.12194442e-04f;
  vf32 q = vsplat(0.001392617612f);
  q = q * r + 0.008363173075f;
  q = q * r + 0.04166655466f;
  q = q * r + 0.1666657703f;
  q = q * r + 0.5f;
  return (1.0f + r) + (r * r) * q;
}
static inline vf32 vsoftmax_exp(vf32 s) {
  vf32 c = s < -104.5f ? vsplat(-104.5f) : s;
  vf32 nf, p = vexp_parts(c, nf);
  vf32 y = __builtin_ia32_scalefps512_mask(p, nf + 64.0f, p, (unsigned short)-1, 4);
  return s != s ? s : y;
}
// Without the NaN select (a NaN s stays NaN through the clamp, the polynomial and scalef) and
// with the clamp as one max instruction (maxps(a, b) gives b when either is NaN).
static inline vf32 vsoftmax_exp_lean(vf32 s) {
  vf32 c = __builtin_ia32_maxps512_mask(vsplat(-104.5f), s, s, (unsigned short)-1, 4);
  vf32 nf, p = vexp_parts(c, nf);
  return __builtin_ia32_scalefps512_mask(p, nf + 64.0f, p, (unsigned short)-1, 4);
}
static inline vf32 vsoftmax_div(vf32 e, vf32 r, vf32 sum) {
  vf32 bound = sum * 0x1p-126f;
  bool any_tiny = __builtin_ia32_cmpps512_mask(e, bound, 0x11, (unsigned short)-1, 4) != 0;
  if (!any_tiny) return e * r;
  vi32 tiny = e < bound;
  vf32 normal = vselect(tiny, vsplat(1.0f), e) * r;
  vf32 t = vselect(tiny, e, vsplat(0.0f)) * (0x1p85f / sum) * 0x1p64f + 8388608.0f;
  return vselect(tiny, (vf32)((vi32)t - 0x4B000000), normal);
}

static bool hot = getenv("HOT") != nullptr, hot2 = getenv("HOT2") != nullptr;
constexpr int R = 2048, C = 2048, COPIES = 8, REPS = 300;
enum Variant { kCoil, kSplit, kLean, kExpPrefetch, kDivPrefetch, kDivPrefetchL2, kVariants };
static const char* kNames[] = {"coil",        "split",       "lean",
                               "lean+pf exp", "lean+pf div", "lean+pf2 div"};

static void softmax(const float* in0, float* out, Variant v) {
#pragma omp parallel for schedule(static)
  for (long x0 = 0; x0 < R; ++x0) {
    const float* x = in0 + (hot ? 0 : x0) * C;
    float scratch[C];
    float mx, sum;
    if (v == kCoil) {
      vf32 m = vsplat(-__builtin_inff());
      for (long j = 0; j < C; j += COIL_VEC) m = vmax(m, vload(x + j));
      mx = hmax(m);
      vf32 s = {};
      for (long j = 0; j < C; j += COIL_VEC) {
        vf32 e = vsoftmax_exp(vload(x + j) - mx);
        vstore(scratch + j, e);
        s += e;
      }
      sum = hsum(s);
    } else {
      vf32 m0 = vsplat(-__builtin_inff()), m1 = m0, m2 = m0, m3 = m0;
      for (long j = 0; j < C; j += 4 * COIL_VEC) {
        m0 = vmax(m0, vload(x + j));
        m1 = vmax(m1, vload(x + j + COIL_VEC));
        m2 = vmax(m2, vload(x + j + 2 * COIL_VEC));
        m3 = vmax(m3, vload(x + j + 3 * COIL_VEC));
      }
      mx = hmax(vmax(vmax(m0, m1), vmax(m2, m3)));
      vf32 s0 = {}, s1 = {};
      const bool lean = v != kSplit;
      for (long j = 0; j < C; j += 2 * COIL_VEC) {
        if (v == kExpPrefetch && x0 + 1 < R) {
          __builtin_prefetch(x + C + j, 0, 3);
          __builtin_prefetch(x + C + j + COIL_VEC, 0, 3);
        }
        vf32 e0 = lean ? vsoftmax_exp_lean(vload(x + j) - mx) : vsoftmax_exp(vload(x + j) - mx);
        vf32 e1 = lean ? vsoftmax_exp_lean(vload(x + j + COIL_VEC) - mx)
                       : vsoftmax_exp(vload(x + j + COIL_VEC) - mx);
        vstore(scratch + j, e0);
        vstore(scratch + j + COIL_VEC, e1);
        s0 += e0;
        s1 += e1;
      }
      sum = hsum(s0 + s1);
    }
    vf32 r = vsplat(1.0f / sum), vs = vsplat(sum);
    for (long j = 0; j < C; j += COIL_VEC) {
      if (v == kDivPrefetch && x0 + 1 < R) __builtin_prefetch(x + C + j, 0, 3);
      if (v == kDivPrefetchL2 && x0 + 1 < R) __builtin_prefetch(x + C + j, 0, 2);
      vstore(out + (hot2 ? 0 : x0) * C + j, vsoftmax_div(vload(scratch + j), r, vs));
    }
  }
}

static void copy(const float* x, float* y) {
#pragma omp parallel for schedule(static)
  for (long i = 0; i < (long)R * C; i += 16) vstore(y + i, vload(x + i));
}

int main() {
  std::vector<float*> in(COPIES);
  float* out = (float*)aligned_alloc(64, (size_t)R * C * 4);
  memset(out, 0, (size_t)R * C * 4);
  for (auto& p : in) {
    p = (float*)aligned_alloc(64, (size_t)R * C * 4);
    for (size_t i = 0; i < (size_t)R * C; ++i) p[i] = (float)((i * 2654435761u) % 1000) / 250.0f;
  }
  std::vector<float> ref((size_t)R * C);
  softmax(in[0], ref.data(), kCoil);
  printf("%d threads, %d x %d float32, 8 rotating inputs, one output\n", omp_get_max_threads(), R,
         C);
  // The variants take turns call by call, so that a shared machine's drift reaches all alike.
  const int kinds = kVariants + 1;  // and the copy
  std::vector<std::vector<double>> t(kinds);
  for (int r = 0; r < REPS; ++r)
    for (int v = 0; v < kinds; ++v) {
      double t0 = omp_get_wtime();
      if (v == kinds - 1)
        copy(in[r % COPIES], out);
      else
        softmax(in[r % COPIES], out, (Variant)v);
      if (r >= 5) t[v].push_back(omp_get_wtime() - t0);
    }
  for (int v = 0; v < kinds; ++v) {
    std::sort(t[v].begin(), t[v].end());
    double ms = t[v][t[v].size() / 2] * 1e3;
    printf("%-13s %8.3f ms (p10 %.3f)  %6.1f GB/s (input + output bytes)\n",
           (v == kVariants ? "copy" : kNames[v]), ms, t[v][t[v].size() / 10] * 1e3,
           2.0 * R * C * 4 / ms / 1e6);
    if (v == kinds - 1) continue;
    softmax(in[0], out, (Variant)v);
    double err = 0;
    for (size_t i = 0; i < ref.size(); ++i)
      err = std::max(err, (double)std::fabs(out[i] - ref[i]) / ref[i]);
    if (err > 1e-5)
      printf("  %s differs: relative %.2g\n", (v == kVariants ? "copy" : kNames[v]), err);
  }
  return 0;
}
