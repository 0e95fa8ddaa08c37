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
#include "attention_probe.h"

// k is stored [H, L, D]; k^T is read through strides, as coil reads it.
static void run_qk(int s) { qk->run(Q[s], K[s], S); }
static void run_pv(int s) { pv->run(S, V[s], O); }

static void run_softmax(int) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < H * L; ++r) softmax_row(S + (size_t)r * L, L);
}
static int R = 32;

// Rows [r0, r0 + R) of head h: scores = q @ k^T (k is L x D row-major: 'T', ldb = D), and
// out = p @ v, each single-threaded.
static void qk_rows(int s, int h, int r0) {
  dnnl_sgemm('N', 'T', R, L, D, 1.0f, Q[s] + ((size_t)h * L + r0) * D, D, K[s] + (size_t)h * L * D,
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

int main() {
  setup();
  run("qk", run_qk, false, 1);
  run("softmax", run_softmax, false, 0);
  run("pv", run_pv, false, 1);
  run("composed", composed, true);
  for (int r : {32, 64, 128}) {
    R = r;
    char name[32];
    snprintf(name, sizeof name, "qk by blocks %d", r);
    run(name, qk_blocks, false, 1);
    snprintf(name, sizeof name, "pv by blocks %d", r);
    run(name, pv_blocks, false, 1);
  }
  run("composed by blocks", composed_blocks, true);
  for (int r : {16, 32, 64, 128}) {
    R = r;
    char name[32];
    snprintf(name, sizeof name, "blocked %d", r);
    run(name, blocked, true);
  }
}
