// What bench/probes/attention_products.cpp and attention_kernel.cpp share: attention's CPU
// shape (8 heads x 256 x 64, float32), inputs rotating over SETS sets, oneDNN's batched products
// as coil's batched path calls them, a row softmax, a float64 check and the timer.
#pragma once
#include "exp512.h"
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <dnnl.hpp>
#include <vector>

static const int H = 8, L = 256, D = 64;  // heads, sequence, features
enum { SETS = 4, REPS = 400 };
static float *Q[SETS], *K[SETS], *V[SETS], *S, *O;  // k is stored [H, L, D]
static const float kScale = 0.125f;

using Dims = dnnl::memory::dims;
static dnnl::engine eng{dnnl::engine::kind::cpu, 0};
static dnnl::memory::desc md(int64_t rows, int64_t cols, Dims strides) {
  return dnnl::memory::desc(Dims{H, rows, cols}, dnnl::memory::data_type::f32, strides);
}
struct Product {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  Product(dnnl::memory::desc a, dnnl::memory::desc b, dnnl::memory::desc c)
      : pd(dnnl::matmul::desc(a, b, c), eng), prim(pd) {}
  void run(const float* a, const float* b, float* c) const {
    dnnl::stream st(eng);
    prim.execute(st, {{DNNL_ARG_SRC, dnnl::memory(pd.src_desc(), eng, (void*)a)},
                      {DNNL_ARG_WEIGHTS, dnnl::memory(pd.weights_desc(), eng, (void*)b)},
                      {DNNL_ARG_DST, dnnl::memory(pd.dst_desc(), eng, c)}});
    st.wait();
  }
};
static Product *qk, *pv;

static void softmax_row(float* x, int n) {
  for (int j = 0; j < n; j += 16)
    _mm512_storeu_ps(x + j, _mm512_mul_ps(_mm512_loadu_ps(x + j), _mm512_set1_ps(kScale)));
  __m512 inv = _mm512_set1_ps(1.0f / exp_shifted_row512(x, x, n));
  for (int j = 0; j < n; j += 16)
    _mm512_storeu_ps(x + j, _mm512_mul_ps(_mm512_loadu_ps(x + j), inv));
}
static void composed(int s) {  // coil's batched path
  qk->run(Q[s], K[s], S);
#pragma omp parallel for schedule(static)
  for (int r = 0; r < H * L; ++r) softmax_row(S + (size_t)r * L, L);
  pv->run(S, V[s], O);
}

static double max_error(int s) {  // against float64, every 37th row
  double worst = 0;
  std::vector<double> p(L);
  for (int r = 0; r < H * L; r += 37) {
    int h = r / L;
    const float* q = Q[s] + (size_t)r * D;
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < L; ++j) {
      double acc = 0;
      for (int d = 0; d < D; ++d) acc += (double)q[d] * K[s][((size_t)h * L + j) * D + d];
      p[j] = acc * kScale;
      mx = std::max(mx, p[j]);
    }
    for (int j = 0; j < L; ++j) sum += p[j] = exp(p[j] - mx);
    for (int d = 0; d < D; ++d) {
      double want = 0;
      for (int j = 0; j < L; ++j) want += p[j] / sum * V[s][((size_t)h * L + j) * D + d];
      worst = std::max(worst, fabs(O[(size_t)r * D + d] - want) / (fabs(want) + 1e-3));
    }
  }
  return worst;
}

// Times f over the rotating sets; `products` is how many of attention's two products f makes
// (its rate is printed over those), and `check` compares its output with float64.
static void run(const char* name, void (*f)(int), bool check, int products = 2) {
  std::vector<double> t(REPS);
  for (int w = 0; w < 10; ++w) f(w % SETS);
  for (int r = 0; r < REPS; ++r) {
    double t0 = omp_get_wtime();
    f(r % SETS);
    t[r] = (omp_get_wtime() - t0) * 1e3;
  }
  std::sort(t.begin(), t.end());
  printf("  %-22s %7.3f ms (p10 %.3f)", name, t[REPS / 2], t[REPS / 10]);
  if (products) printf("  %6.0f GFLOP/s", 2.0 * products * H * L * L * D / (t[REPS / 2] * 1e6));
  if (check) {
    memset(O, 0, sizeof(float) * H * L * D);
    f(1);
    printf("  max rel error %.1e", max_error(1));
  }
  printf("\n");
}

static float* randoms(size_t n) {
  float* p = (float*)aligned_alloc(64, sizeof(float) * n);
  for (size_t i = 0; i < n; ++i) p[i] = 2.0f * rand() / RAND_MAX - 1.0f;
  return p;
}

// The inputs, the scores and output buffers, and the batched products (k^T read through
// strides, as coil reads it).
static void setup() {
  srand(1);
  for (int s = 0; s < SETS; ++s)
    Q[s] = randoms(H * L * D), K[s] = randoms(H * L * D), V[s] = randoms(H * L * D);
  S = randoms((size_t)H * L * L);
  O = randoms(H * L * D);
  const int64_t LD = L * D, LL = L * L;
  qk = new Product(md(L, D, {LD, D, 1}), md(D, L, {LD, 1, D}), md(L, L, {LL, L, 1}));
  pv = new Product(md(L, L, {LL, L, 1}), md(L, D, {LD, D, 1}), md(L, D, {LD, D, 1}));
  printf("attention %dx%dx%d, %d threads\n", H, L, D, omp_get_max_threads());
}
