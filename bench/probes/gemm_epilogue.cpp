// Is a row softmax cheaper as the matrix product's epilogue than as a kernel after it?
// softmax(a @ b, dim=1) at mm_softmax's CPU shape (512^3 float32), several ways:
//   lib alone          oneDNN's multi-threaded sgemm only
//   lib, then softmax  the product, then a parallel row softmax
//   prim alone         oneDNN's matmul primitive (what coil calls, and "lib %" times)
//   prim, then         the primitive, then the softmax (coil's composition today)
//   openblas, then     the same with OpenBLAS's multi-threaded product
//   blocked openblas   each thread: its block of rows' product (single-threaded OpenBLAS),
//                      then the softmax of those rows while they are in its cache
//   blocked onednn     the same with oneDNN's sgemm inside the parallel region
//   blocked prim       the same with a matmul primitive made for one thread and a block
// Inputs rotate over 4 sets, as coil-bench does. Every variant is checked against a float64
// reference.
//   g++ -O3 -march=native -fopenmp bench/probes/gemm_epilogue.cpp -o /tmp/ge -ldnnl \
//       -L/usr/lib/x86_64-linux-gnu/openblas-openmp -lopenblas -lm && /tmp/ge
#include "exp512.h"
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.hpp>
#include <unordered_map>

// Declared by hand: cblas.h's location differs between OpenBLAS builds. dnnl.h declares
// dnnl_sgemm.
extern "C" void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha,
                            const float* a, int lda, const float* b, int ldb, float beta, float* c,
                            int ldc);
enum { RowMajor = 101, NoTrans = 111 };

static int M = 512, N = 512, K = 512;
enum { SETS = 4, REPS = 400 };

// One row: max, exp(x - max) into y with its sum, then y scaled (N a multiple of 16).
static void softmax_row(const float* x, float* y) {
  __m512 inv = _mm512_set1_ps(1.0f / exp_shifted_row512(x, y, N));
  for (int j = 0; j < N; j += 16)
    _mm512_storeu_ps(y + j, _mm512_mul_ps(_mm512_loadu_ps(y + j), inv));
}

static float *A[SETS], *B, *C, *Y;

static void lib_alone(int s) { dnnl_sgemm('N', 'N', M, N, K, 1, A[s], K, B, N, 0, C, N); }

static void softmax_all(void) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < M; ++i) softmax_row(C + (size_t)i * N, Y + (size_t)i * N);
}

static void lib_then_softmax(int s) {
  lib_alone(s);
  softmax_all();
}

// A matmul primitive for rows x N = (rows x K) @ (K x N), made for the current team size.
struct Prim {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  int rows;
  bool user_pad;
  // The whole product keeps oneDNN's own scratchpad (as coil does); a block's primitive runs
  // on every thread at once and gets a scratchpad per thread.
  Prim(int r, bool user) : rows(r), user_pad(user) {
    using D = dnnl::memory::desc;
    auto f32 = dnnl::memory::data_type::f32;
    dnnl::primitive_attr attr;
    if (user) attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    pd = dnnl::matmul::primitive_desc(
        dnnl::matmul::desc(D({r, K}, f32, dnnl::memory::format_tag::ab),
                           D({K, N}, f32, dnnl::memory::format_tag::ab),
                           D({r, N}, f32, dnnl::memory::format_tag::ab)),
        attr, eng);
    prim = dnnl::matmul(pd);
  }
  void run(const float* a, float* c) const {
    dnnl::stream st(eng);
    dnnl::memory ma(pd.src_desc(), eng, (void*)a), mb(pd.weights_desc(), eng, B),
        mc(pd.dst_desc(), eng, c);
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
    if (user_pad) {
      static thread_local char* pad = nullptr;
      if (!pad) pad = (char*)aligned_alloc(64, (pd.scratchpad_desc().get_size() + 64) / 64 * 64);
      args[DNNL_ARG_SCRATCHPAD] = dnnl::memory(pd.scratchpad_desc(), eng, pad);
    }
    prim.execute(st, args);
    st.wait();
  }
};
static Prim *whole, *block;

static void prim_alone(int s) { whole->run(A[s], C); }
static void prim_then_softmax(int s) {
  prim_alone(s);
  softmax_all();
}
static void blocked_prim(int s) {
#pragma omp parallel
  {
    int t = omp_get_thread_num(), r0 = t * block->rows;
    if (r0 < M) {  // M a multiple of the block: the probe's shapes are
      block->run(A[s] + (size_t)r0 * K, Y + (size_t)r0 * N);
      for (int i = r0; i < r0 + block->rows; ++i) softmax_row(Y + (size_t)i * N, Y + (size_t)i * N);
    }
  }
}

static void openblas_then_softmax(int s) {
  cblas_sgemm(RowMajor, NoTrans, NoTrans, M, N, K, 1, A[s], K, B, N, 0, C, N);
  softmax_all();
}

// Rows [r0, r1) of the product, then their softmax, on the calling thread. The block's
// product goes straight into the output and is normalised in place.
static void blocked(int s, int use_dnnl) {
#pragma omp parallel
  {
    int t = omp_get_thread_num(), nt = omp_get_num_threads();
    int per = (M + nt - 1) / nt, r0 = t * per, r1 = r0 + per < M ? r0 + per : M;
    if (r0 < r1) {
      const float* a = A[s] + (size_t)r0 * K;
      float* y = Y + (size_t)r0 * N;
      if (use_dnnl)
        dnnl_sgemm('N', 'N', r1 - r0, N, K, 1, a, K, B, N, 0, y, N);
      else
        cblas_sgemm(RowMajor, NoTrans, NoTrans, r1 - r0, N, K, 1, a, K, B, N, 0, y, N);
      for (int i = r0; i < r1; ++i) softmax_row(Y + (size_t)i * N, Y + (size_t)i * N);
    }
  }
}
static void blocked_openblas(int s) { blocked(s, 0); }
static void blocked_onednn(int s) { blocked(s, 1); }

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static double max_error(int s) {  // against float64, set s
  double worst = 0, *row = (double*)malloc(sizeof(double) * N);
  for (int i = 0; i < M; i += 37) {
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < N; ++j) {
      double acc = 0;
      for (int k = 0; k < K; ++k) acc += (double)A[s][(size_t)i * K + k] * B[(size_t)k * N + j];
      row[j] = acc;
      mx = acc > mx ? acc : mx;
    }
    for (int j = 0; j < N; ++j) sum += row[j] = exp(row[j] - mx);
    for (int j = 0; j < N; ++j) {
      double e = fabs(Y[(size_t)i * N + j] - row[j] / sum) / (row[j] / sum + 1e-30);
      worst = e > worst ? e : worst;
    }
  }
  free(row);
  return worst;
}

static void run(const char* name, void (*f)(int), int checks) {
  double t[REPS];
  for (int w = 0; w < 10; ++w) f(w % SETS);
  for (int r = 0; r < REPS; ++r) {
    double t0 = omp_get_wtime();
    f(r % SETS);
    t[r] = (omp_get_wtime() - t0) * 1e3;
  }
  qsort(t, REPS, sizeof(double), cmp);
  if (checks) {
    memset(Y, 0, sizeof(float) * M * N);
    f(1);
    printf("  %-20s %7.3f ms (p10 %.3f)  max rel error %.1e\n", name, t[REPS / 2], t[REPS / 10],
           max_error(1));
  } else {
    printf("  %-20s %7.3f ms (p10 %.3f)\n", name, t[REPS / 2], t[REPS / 10]);
  }
}

int main(int argc, char** argv) {
  if (argc == 4) M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]);
  srand(1);
  for (int s = 0; s < SETS; ++s) {
    A[s] = (float*)aligned_alloc(64, sizeof(float) * M * K);
    for (int i = 0; i < M * K; ++i) A[s][i] = (float)rand() / RAND_MAX - 0.5f;
  }
  B = (float*)aligned_alloc(64, sizeof(float) * K * N);
  C = (float*)aligned_alloc(64, sizeof(float) * M * N);
  Y = (float*)aligned_alloc(64, sizeof(float) * M * N);
  int nt = omp_get_max_threads();
  whole = new Prim(M, false);
  omp_set_num_threads(1);  // the block's primitive runs on one thread inside the team
  block = new Prim(M / nt, true);
  omp_set_num_threads(nt);
  for (int i = 0; i < K * N; ++i) B[i] = (float)rand() / RAND_MAX - 0.5f;
  printf("gemm_epilogue %dx%dx%d, %d threads\n", M, N, K, omp_get_max_threads());
  run("lib alone", lib_alone, 0);
  run("lib, then softmax", lib_then_softmax, 1);
  run("openblas, then", openblas_then_softmax, 1);
  run("blocked openblas", blocked_openblas, 1);
  run("blocked onednn", blocked_onednn, 1);
  run("prim alone", prim_alone, 0);
  run("prim, then", prim_then_softmax, 1);
  run("blocked prim", blocked_prim, 1);
  run("lib alone", lib_alone, 0);
  return 0;
}
