// What the GPU probes share: CHECK (a CUDA call that fails ends the probe with its message) and
// a device-time Timer (CUDA events around each launch, queued behind a 256 MB write that
// empties the L2 cache, as coil-bench's device time; the median of `reps`).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                          \
  do {                                                    \
    cudaError_t e = (x);                                  \
    if (e != cudaSuccess) {                               \
      std::printf("%s: %s\n", #x, cudaGetErrorString(e)); \
      std::exit(1);                                       \
    }                                                     \
  } while (0)

struct Timer {
  float* flush;
  size_t flush_bytes = size_t{256} << 20;
  Timer() { CHECK(cudaMalloc(&flush, flush_bytes)); }
  template <typename F>
  double median_ms(F launch, int reps = 40) {
    launch();
    std::vector<cudaEvent_t> a(reps), b(reps);
    for (int r = 0; r < reps; ++r) {
      CHECK(cudaEventCreate(&a[r]));
      CHECK(cudaEventCreate(&b[r]));
      CHECK(cudaMemsetAsync(flush, r, flush_bytes));
      CHECK(cudaEventRecord(a[r]));
      launch();
      CHECK(cudaEventRecord(b[r]));
    }
    CHECK(cudaDeviceSynchronize());
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
      float ms;
      CHECK(cudaEventElapsedTime(&ms, a[r], b[r]));
      t.push_back(ms);
      cudaEventDestroy(a[r]);
      cudaEventDestroy(b[r]);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
};
