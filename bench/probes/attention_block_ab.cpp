// coil's attention kernel (runtime/kernels/attention_block.cpp, or a variant of that file
// compiled in its place) at the attention workload's CPU shape, 8 heads x 256 x 64 float32, as
// attention_by_row_blocks runs it: one parallel region, a task per block of 128 query rows;
// then one thread's time per block. Inputs rotate over 8 sets. Build one binary per variant
// and run them in turns (bench/device_attention_block_ab.sh). With a second argument
// (--scaling) it also times one block per thread at 1, 2, 4, ... threads, cold and again hot:
//   g++ -O3 -march=native -fopenmp -std=c++20 -I src -I include bench/probes/attention_block_ab.cpp
//   \
//       src/runtime/kernels/attention_block.cpp -o /tmp/ab
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "runtime/kernels/attention_block.h"

namespace {

constexpr int kHeads = 8, kLen = 256, kDim = 64, kReps = 1000;

double median_ms(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t[t.size() / 2] * 1e3;
}

// The calling core's clock now, in GHz: 20,000 dependent integer additions, a cycle each on
// most cores. The device's Xeon finishes two such additions a cycle (it reads 7.5-8 GHz), so
// there it is a ratio between thread counts, not a clock.
double clock_ghz() {
  uint64_t x = 0;
  const double t0 = omp_get_wtime();
  for (int i = 0; i < 200; ++i) asm volatile(".rept 100\n\taddq $1, %0\n\t.endr" : "+r"(x));
  return 2e4 / (omp_get_wtime() - t0) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  const char* name = argc > 1 ? argv[1] : "kernel";
  // ROWS: query rows a block (128, as coil runs this shape); the region's schedule is
  // OMP_SCHEDULE's (static unless set).
  const int kRows = std::getenv("ROWS") ? std::atoi(std::getenv("ROWS")) : 128;
  // SETS: input sets rotated through (8, as coil-bench rotates this workload's 12 MB).
  const int kSets = std::getenv("SETS") ? std::atoi(std::getenv("SETS")) : 8;
  std::vector<std::vector<float>> q(kSets), k(kSets), v(kSets);
  for (int s = 0; s < kSets; ++s)
    for (auto* x : {&q[s], &k[s], &v[s]}) {
      x->resize(kHeads * kLen * kDim);
      for (float& f : *x) f = 2.0f * std::rand() / RAND_MAX - 1.0f;
    }
  std::vector<float> out(kHeads * kLen * kDim);
  auto block = [&](int set, int task) {
    const int h = task / (kLen / kRows), r0 = task % (kLen / kRows) * kRows;
    const float* base = q[set].data() + (h * kLen + r0) * kDim;
    return coil::AttentionBlock<float>{.q = base,
                                       .q_row = kDim,
                                       .q_col = 1,
                                       .k = k[set].data() + h * kLen * kDim,
                                       .k_row = kDim,
                                       .k_col = 1,
                                       .v = v[set].data() + h * kLen * kDim,
                                       .v_row = kDim,
                                       .out = out.data() + (h * kLen + r0) * kDim,
                                       .out_row = kDim,
                                       .n = kRows,
                                       .s = kLen,
                                       .e = kDim,
                                       .ev = kDim,
                                       .first_row = r0,
                                       .scale = 0.125f,
                                       .causal = false};
  };
  const int tasks = kHeads * (kLen / kRows);
  std::vector<double> region, one;
  for (int rep = 0; rep < kReps + 20; ++rep) {
    const double t0 = omp_get_wtime();
#pragma omp parallel for schedule(runtime)
    for (int t = 0; t < tasks; ++t) coil::attention_block(block(rep % kSets, t));
    if (rep >= 20) region.push_back(omp_get_wtime() - t0);
  }
  for (int rep = 0; rep < kReps; ++rep) {
    const double t0 = omp_get_wtime();
    coil::attention_block(block(rep % kSets, rep % tasks));
    one.push_back(omp_get_wtime() - t0);
  }
  std::printf("%-10s %2d threads: %.4f ms per call (p10 %.4f); one thread, one block %.1f us\n",
              name, omp_get_max_threads(), median_ms(region),
              (std::sort(region.begin(), region.end()), region[region.size() / 10] * 1e3),
              median_ms(one) * 1e3);
  if (argc < 3) return 0;
  // --scaling: W threads, one block each (its inputs fresh from the rotation), then the same
  // block again (its inputs now in that core's cache): the region's time, and inside it each
  // block's time, the median over threads and calls and the slowest thread's median; then
  // each core's clock right after its blocks (every 10th call), to tell a lower clock from a
  // slower memory side.
  for (int w = 1; w <= omp_get_max_threads(); w *= 2) {
    std::vector<double> whole;
    std::vector<std::vector<double>> first(w), again(w), ghz(w);
    for (int rep = 0; rep < kReps + 20; ++rep) {
      const double t0 = omp_get_wtime();
#pragma omp parallel num_threads(w)
      {
        const int me = omp_get_thread_num();
        const coil::AttentionBlock b = block(rep % kSets, me % tasks);
        const double a = omp_get_wtime();
        coil::attention_block(b);
        const double m = omp_get_wtime();
        coil::attention_block(b);
        if (rep >= 20) first[me].push_back(m - a), again[me].push_back(omp_get_wtime() - m);
        if (rep >= 20 && rep % 10 == 0) ghz[me].push_back(clock_ghz() * 1e-3);
      }
      if (rep >= 20) whole.push_back(omp_get_wtime() - t0);
    }
    std::vector<double> firsts, agains, slowest, clocks;
    for (int t = 0; t < w; ++t) {
      firsts.insert(firsts.end(), first[t].begin(), first[t].end());
      agains.insert(agains.end(), again[t].begin(), again[t].end());
      clocks.insert(clocks.end(), ghz[t].begin(), ghz[t].end());
      slowest.push_back(median_ms(first[t]));
    }
    std::printf(
        "  %2d threads, two blocks each: region %.1f us; a block: first %.1f us (slowest "
        "thread %.1f), again %.1f us; clock %.2f GHz\n",
        w, median_ms(whole) * 1e3, median_ms(firsts) * 1e3,
        *std::max_element(slowest.begin(), slowest.end()) * 1e3, median_ms(agains) * 1e3,
        median_ms(clocks));
  }
}
