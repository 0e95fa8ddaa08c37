// Where attention's time goes on the CPU, and which composition is fastest:
// softmax(q @ k^T * s) @ v at the attention workload's CPU shape (8 heads x 256 x 64, float32).
//   qk                 the scores' batched product, oneDNN's matmul primitive (what coil calls)
//   pv                 the output's batched product, the same
//   softmax            a parallel row softmax over the scores
//   composed           qk, softmax, pv: coil's attention today
//   qk/pv by blocks R  the product as tasks of R rows of one head, oneDNN's sgemm on one
//                      thread per task inside one parallel region
//   composed by blocks qk, softmax and pv, each by blocks of 128 rows
//   blocked R          flash-style: each task a block of R query rows of one head, its scores,
//                      softmax and output rows on one thread (oneDNN's sgemm, one thread
//                      inside the parallel region), the scores in that thread's cache
// Inputs rotate over 4 sets, as coil-bench does; every composition is checked against float64.
//   g++ -O3 -march=native -fopenmp bench/probes/attention_products.cpp -o /tmp/ap -ldnnl
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
static float *Q[SETS], *Kt[SETS], *V[SETS], *S, *O;
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

// k is stored [H, L, D]; k^T is read through strides, as coil reads it.
static void run_qk(int s) { qk->run(Q[s], Kt[s], S); }
static void run_pv(int s) { pv->run(S, V[s], O); }

static void softmax_row(float* x, int n) {
  for (int j = 0; j < n; j += 16)
    _mm512_storeu_ps(x + j, _mm512_mul_ps(_mm512_loadu_ps(x + j), _mm512_set1_ps(kScale)));
  __m512 inv = _mm512_set1_ps(1.0f / exp_shifted_row512(x, x, n));
  for (int j = 0; j < n; j += 16)
    _mm512_storeu_ps(x + j, _mm512_mul_ps(_mm512_loadu_ps(x + j), inv));
}
static void run_softmax(int) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < H * L; ++r) softmax_row(S + (size_t)r * L, L);
}
static void composed(int s) {
  run_qk(s);
  run_softmax(s);
  run_pv(s);
}
static int R = 32;

// Rows [r0, r0 + R) of head h: scores = q @ k^T (k is L x D row-major: 'T', ldb = D), and
// out = p @ v, each single-threaded.
static void qk_rows(int s, int h, int r0) {
  dnnl_sgemm('N', 'T', R, L, D, 1.0f, Q[s] + ((size_t)h * L + r0) * D, D, Kt[s] + (size_t)h * L * D,
             D, 0.0f, S + ((size_t)h * L + r0) * L, L);
}
static void pv_rows(int s, int h, int r0) {
  dnnl_sgemm('N', 'N', R, D, L, 1.0f, S + ((size_t)h * L + r0) * L, L, V[s] + (size_t)h * L * D, D,
             0.0f, O + ((size_t)h * L + r0) * D, D);
}
static void qk_blocks(int s) {
#pragma omp parallel for schedule(static)
  for (int t = 0; t < H * (L / R); ++t) qk_rows(s, t / (L / R), (t % (L / R)) * R);
}
static void pv_blocks(int s) {
#pragma omp parallel for schedule(static)
  for (int t = 0; t < H * (L / R); ++t) pv_rows(s, t / (L / R), (t % (L / R)) * R);
}
static void composed_blocks(int s) {
  R = 128;
  qk_blocks(s);
  run_softmax(s);
  pv_blocks(s);
}

static void blocked(int s) {
  int blocks = L / R;
#pragma omp parallel for schedule(static)
  for (int t = 0; t < H * blocks; ++t) {
    int h = t / blocks, r0 = (t % blocks) * R;
    qk_rows(s, h, r0);
    for (int i = 0; i < R; ++i) softmax_row(S + ((size_t)h * L + r0 + i) * L, L);
    pv_rows(s, h, r0);
  }
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
      for (int d = 0; d < D; ++d) acc += (double)q[d] * Kt[s][((size_t)h * L + j) * D + d];
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

static void run(const char* name, void (*f)(int), bool check) {
  std::vector<double> t(REPS);
  for (int w = 0; w < 10; ++w) f(w % SETS);
  for (int r = 0; r < REPS; ++r) {
    double t0 = omp_get_wtime();
    f(r % SETS);
    t[r] = (omp_get_wtime() - t0) * 1e3;
  }
  std::sort(t.begin(), t.end());
  double flops = 2.0 * 2 * H * L * L * D;
  printf("  %-22s %7.3f ms (p10 %.3f)", name, t[REPS / 2], t[REPS / 10]);
  if (check) {
    memset(O, 0, sizeof(float) * H * L * D);
    f(1);
    printf("  %6.0f GFLOP/s  max rel error %.1e", flops / (t[REPS / 2] * 1e6), max_error(1));
  }
  printf("\n");
}

static float* randoms(size_t n) {
  float* p = (float*)aligned_alloc(64, sizeof(float) * n);
  for (size_t i = 0; i < n; ++i) p[i] = 2.0f * rand() / RAND_MAX - 1.0f;
  return p;
}

int main() {
  srand(1);
  for (int s = 0; s < SETS; ++s)
    Q[s] = randoms(H * L * D), Kt[s] = randoms(H * L * D), V[s] = randoms(H * L * D);
  S = randoms((size_t)H * L * L);
  O = randoms(H * L * D);
  const int64_t LD = L * D, LL = L * L;
  qk = new Product(md(L, D, {LD, D, 1}), md(D, L, {LD, 1, D}), md(L, L, {LL, L, 1}));
  pv = new Product(md(L, L, {LL, L, 1}), md(L, D, {LD, D, 1}), md(L, D, {LD, D, 1}));
  printf("attention %dx%dx%d, %d threads\n", H, L, D, omp_get_max_threads());
  run("qk", run_qk, false);
  run("softmax", run_softmax, false);
  run("pv", run_pv, false);
  run("composed", composed, true);
  for (int r : {32, 64, 128}) {
    R = r;
    char name[32];
    snprintf(name, sizeof name, "qk by blocks %d", r);
    run(name, qk_blocks, false);
    snprintf(name, sizeof name, "pv by blocks %d", r);
    run(name, pv_blocks, false);
  }
  run("composed by blocks", composed_blocks, true);
  for (int r : {16, 32, 64, 128}) {
    R = r;
    char name[32];
    snprintf(name, sizeof name, "blocked %d", r);
    run(name, blocked, true);
  }
}
