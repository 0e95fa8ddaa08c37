// Can a hand-written attention kernel beat the library's products on this CPU?
// softmax(q @ k^T * s) @ v at the attention workload's CPU shape (8 heads x 256 x 64, float32):
//   fma peak           one thread's multiply-add rate (24 independent chains), then all threads'
//   sgemm 1 thread     oneDNN's sgemm on one thread per task: a block's two products (128 rows)
//   composed           coil's batched path: two batched oneDNN products around a row softmax
//   blocked 128        flash-style with oneDNN's sgemm inside one parallel region (coil's blocks)
//   fused R            each task R query rows of one head in one AVX-512 kernel: the scores
//                      transposed (keys x queries: s^T = k @ (q s)^T, so the softmax's
//                      reductions run down columns, vertically), exp(s - max) unnormalised,
//                      then o = p @ v divided by the sums at the end (no division per score)
//   fused R, chunks KC the same with the second product over chunks of KC keys, each chunk's
//                      rows of v kept in L1 across the row tiles
// Then one thread's time per block in each stage (the two forms of the output in turns).
// Inputs rotate over 4 sets; each composition is checked against float64.
//   g++ -O3 -march=native -fopenmp bench/probes/attention_kernel.cpp -o /tmp/ak -ldnnl
#include "attention_probe.h"

static int R = 128;
static void blocked(int s) {
  int blocks = L / R;
#pragma omp parallel for schedule(static)
  for (int t = 0; t < H * blocks; ++t) {
    int h = t / blocks, r0 = (t % blocks) * R;
    float* sc = S + ((size_t)h * L + r0) * L;
    dnnl_sgemm('N', 'T', R, L, D, 1.0f, Q[s] + ((size_t)h * L + r0) * D, D,
               K[s] + (size_t)h * L * D, D, 0.0f, sc, L);
    for (int i = 0; i < R; ++i) softmax_row(sc + (size_t)i * L, L);
    dnnl_sgemm('N', 'N', R, D, L, 1.0f, sc, L, V[s] + (size_t)h * L * D, D, 0.0f,
               O + ((size_t)h * L + r0) * D, D);
  }
}

// s^T rows j0 .. j0+MR of keys, columns i0 .. i0+32 of queries: sum over p of k[j][p] qt[p][i];
// m0 and m1 keep the columns' running maximum.
template <int MR>
static inline void scores_tile(const float* k, const float* qt, int n, float* st, int j0, int i0,
                               __m512& m0, __m512& m1) {
  __m512 acc[MR][2];
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int p = 0; p < D; ++p) {
    __m512 b0 = _mm512_loadu_ps(qt + p * n + i0), b1 = _mm512_loadu_ps(qt + p * n + i0 + 16);
    for (int r = 0; r < MR; ++r) {
      __m512 a = _mm512_set1_ps(k[(j0 + r) * D + p]);
      acc[r][0] = _mm512_fmadd_ps(a, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(a, b1, acc[r][1]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    _mm512_storeu_ps(st + (j0 + r) * n + i0, acc[r][0]);
    _mm512_storeu_ps(st + (j0 + r) * n + i0 + 16, acc[r][1]);
    m0 = _mm512_max_ps(m0, acc[r][0]);
    m1 = _mm512_max_ps(m1, acc[r][1]);
  }
}
// o rows i0 .. i0+MR: sum over keys j0 .. j1 of pt[j][i] v[j][0..64); the first chunk of keys
// starts from zero, later ones from what o holds, and the last scales by inv. Chunks of KC keys
// keep their rows of v (KC x 256 bytes) in L1 across the row tiles, where the whole v (64 KB)
// streams from L2 for each tile.
template <int MR>
static inline void output_tile_keys(const float* pt, const float* v, int n, const float* inv,
                                    float* o, int i0, int j0, int j1) {
  __m512 acc[MR][4];
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < 4; ++c)
      acc[r][c] = j0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(o + (i0 + r) * D + 16 * c);
  for (int j = j0; j < j1; ++j) {
    __m512 b[4];
    for (int c = 0; c < 4; ++c) b[c] = _mm512_loadu_ps(v + j * D + 16 * c);
    for (int r = 0; r < MR; ++r) {
      __m512 a = _mm512_set1_ps(pt[j * n + i0 + r]);
      for (int c = 0; c < 4; ++c) acc[r][c] = _mm512_fmadd_ps(a, b[c], acc[r][c]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    __m512 f = _mm512_set1_ps(j1 == L ? inv[i0 + r] : 1.0f);
    for (int c = 0; c < 4; ++c)
      _mm512_storeu_ps(o + (i0 + r) * D + 16 * c, _mm512_mul_ps(acc[r][c], f));
  }
}
static int KC = 64;

// One task: n query rows (a multiple of 32) of one head, in three stages. Scratch: qt D x n,
// st L x n, mx and inv n each.
static void pack_and_scores(const float* q, const float* k, int n, float* qt, float* st,
                            float* mx) {
  const __m512i rows = _mm512_mullo_epi32(
      _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi32(D));
  for (int i0 = 0; i0 < n; i0 += 16)
    for (int p = 0; p < D; ++p)
      _mm512_storeu_ps(qt + p * n + i0, _mm512_mul_ps(_mm512_i32gather_ps(rows, q + i0 * D + p, 4),
                                                      _mm512_set1_ps(kScale)));
  for (int i0 = 0; i0 < n; i0 += 32) {
    __m512 m0 = _mm512_set1_ps(-INFINITY), m1 = m0;
    int j0 = 0;
    for (; j0 + 12 <= L; j0 += 12) scores_tile<12>(k, qt, n, st, j0, i0, m0, m1);
    for (; j0 + 4 <= L; j0 += 4) scores_tile<4>(k, qt, n, st, j0, i0, m0, m1);
    for (; j0 < L; ++j0) scores_tile<1>(k, qt, n, st, j0, i0, m0, m1);
    _mm512_storeu_ps(mx + i0, m0);
    _mm512_storeu_ps(mx + i0 + 16, m1);
  }
}
static void exps(int n, float* st, const float* mx, float* inv) {
  for (int i0 = 0; i0 < n; i0 += 16) {
    __m512 m = _mm512_loadu_ps(mx + i0), s0 = _mm512_setzero_ps(), s1 = s0;
    for (int j = 0; j < L; j += 2) {
      __m512 e0 = exp512(_mm512_sub_ps(_mm512_loadu_ps(st + j * n + i0), m));
      __m512 e1 = exp512(_mm512_sub_ps(_mm512_loadu_ps(st + (j + 1) * n + i0), m));
      _mm512_storeu_ps(st + j * n + i0, e0);
      _mm512_storeu_ps(st + (j + 1) * n + i0, e1);
      s0 = _mm512_add_ps(s0, e0);
      s1 = _mm512_add_ps(s1, e1);
    }
    _mm512_storeu_ps(inv + i0, _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(s0, s1)));
  }
}
static void output(const float* v, float* o, int n, const float* st, const float* inv) {
  int i0 = 0;
  for (; i0 + 6 <= n; i0 += 6) output_tile_keys<6>(st, v, n, inv, o, i0, 0, L);
  for (; i0 < n; ++i0) output_tile_keys<1>(st, v, n, inv, o, i0, 0, L);
}
static void output_chunked(const float* v, float* o, int n, const float* st, const float* inv) {
  for (int j0 = 0; j0 < L; j0 += KC) {
    int i0 = 0, j1 = std::min(L, j0 + KC);
    for (; i0 + 6 <= n; i0 += 6) output_tile_keys<6>(st, v, n, inv, o, i0, j0, j1);
    for (; i0 < n; ++i0) output_tile_keys<1>(st, v, n, inv, o, i0, j0, j1);
  }
}
static bool chunked = false;
static void fused_block(const float* q, const float* k, const float* v, float* o, int n, float* qt,
                        float* st) {
  float mx[256], inv[256];
  pack_and_scores(q, k, n, qt, st, mx);
  exps(n, st, mx, inv);
  if (chunked)
    output_chunked(v, o, n, st, inv);
  else
    output(v, o, n, st, inv);
}

static float *QT, *ST;  // per-thread scratch
static void fused(int s) {
  int blocks = L / R;
#pragma omp parallel for schedule(static)
  for (int t = 0; t < H * blocks; ++t) {
    int h = t / blocks, r0 = (t % blocks) * R, me = omp_get_thread_num();
    fused_block(Q[s] + ((size_t)h * L + r0) * D, K[s] + (size_t)h * L * D, V[s] + (size_t)h * L * D,
                O + ((size_t)h * L + r0) * D, R, QT + (size_t)me * D * 256,
                ST + (size_t)me * L * 256);
  }
}

// One thread's time per block of 128 rows in each stage, and its products' rates.
static void parts() {
  const int n = 128;
  float mx[256], inv[256];
  double t[4] = {0, 0, 0, 0};
  for (int rep = 0; rep < 2000; ++rep) {
    int s = rep % SETS, h = rep / SETS % H;
    double t0 = omp_get_wtime();
    pack_and_scores(Q[s] + (size_t)h * L * D, K[s] + (size_t)h * L * D, n, QT, ST, mx);
    double t1 = omp_get_wtime();
    exps(n, ST, mx, inv);
    double t2 = omp_get_wtime();
    output(V[s] + (size_t)h * L * D, O, n, ST, inv);
    double t3 = omp_get_wtime();
    output_chunked(V[s] + (size_t)h * L * D, O, n, ST, inv);
    double t4 = omp_get_wtime();
    t[0] += t1 - t0, t[1] += t2 - t1, t[2] += t3 - t2, t[3] += t4 - t3;
  }
  double f = 2.0 * n * L * D * 2000 / 1e9;
  printf(
      "  one thread, per block: pack + scores %.1f us (%.0f GFLOP/s), exp %.1f us, output %.1f us"
      " (%.0f GFLOP/s), by chunks of %d keys %.1f us (%.0f GFLOP/s)\n",
      t[0] * 500, f / t[0], t[1] * 500, t[2] * 500, f / t[2], KC, t[3] * 500, f / t[3]);
}

static void sgemm_one_thread(int s) {  // the block products alone, as "blocked 128" runs them
#pragma omp parallel for schedule(static)
  for (int t = 0; t < H * 2; ++t) {
    int h = t / 2, r0 = (t % 2) * 128;
    float* sc = S + ((size_t)h * L + r0) * L;
    dnnl_sgemm('N', 'T', 128, L, D, 1.0f, Q[s] + ((size_t)h * L + r0) * D, D,
               K[s] + (size_t)h * L * D, D, 0.0f, sc, L);
    dnnl_sgemm('N', 'N', 128, D, L, 1.0f, sc, L, V[s] + (size_t)h * L * D, D, 0.0f,
               O + ((size_t)h * L + r0) * D, D);
  }
}

// Multiply-adds per second of one thread: 24 independent chains of fmas.
static double fma_rate() {
  __m512 acc[24];
  for (int i = 0; i < 24; ++i) acc[i] = _mm512_set1_ps(1.0f + i * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  const long iters = 4000000;
  double t0 = omp_get_wtime();
  for (long it = 0; it < iters; ++it)
#pragma GCC unroll 24
    for (int i = 0; i < 24; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  double sec = omp_get_wtime() - t0;
  float sink = 0;
  for (int i = 0; i < 24; ++i) sink += _mm512_reduce_add_ps(acc[i]);
  if (sink == 12345.0f) printf("!");
  return 2.0 * 16 * 24 * iters / sec / 1e9;
}

int main() {
  setup();
  const int threads = omp_get_max_threads();
  QT = randoms((size_t)threads * D * 256);
  ST = randoms((size_t)threads * L * 256);
  printf("  fma peak, 1 thread    %7.1f GFLOP/s\n", fma_rate());
  double all = 0;
#pragma omp parallel reduction(+ : all)
  all += fma_rate();
  printf("  fma peak, all threads %7.1f GFLOP/s\n", all);
  for (int round = 0; round < 2; ++round) {
    run("sgemm 1 thread x 16", sgemm_one_thread, false);
    run("composed", composed, true);
    R = 128;
    run("blocked 128", blocked, true);
    for (int r : {64, 128}) {
      R = r;
      char name[32];
      snprintf(name, sizeof name, "fused %d", r);
      chunked = false;
      run(name, fused, true);
      snprintf(name, sizeof name, "fused %d, chunks %d", r, KC);
      chunked = true;
      run(name, fused, true);
      chunked = false;
    }
  }
  for (int kc : {32, 64, 128}) {
    KC = kc;
    parts();
  }
}
