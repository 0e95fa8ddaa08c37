// What a sum down long columns (a bias or layer-norm weight gradient: sum(x, dim=0) of
// [4096 tokens, C]) needs to come near the GPU's read bandwidth. coil splits the 4096 rows into
// P pieces laid out [P, C]: a partials kernel of 32 columns a block with 16 threads down each
// (a warp reads one float of 32 consecutive columns: 128 bytes; the 16 meet in shared memory),
// then a thread per column sums its P partials. The variants: the piece count P, threads down
// each column, and each lane reading four consecutive columns as one float4 (512 bytes a warp).
// Each is timed in device time, both kernels, behind an L2-emptying write (as coil-bench), and
// checked against a float64 sum.
//
//   nvcc -O3 -arch=sm_90 bench/probes/column_sum.cu -o /tmp/column_sum && /tmp/column_sum
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <type_traits>
#include <vector>

#include "cuda_timer.cuh"

// Partial p of column c: the sum of rows [p * len, (p + 1) * len) of column c, written to
// part[p * cols + c]. A block: 32 lanes (columns, V each) by PARTS threads down them.
template <int V, int PARTS>
__global__ void partials(const float* __restrict__ x, float* __restrict__ part, long cols,
                         long len, long pieces) {
  using Vec = typename std::conditional<V == 4, float4, float>::type;
  __shared__ Vec s[32 * PARTS];
  const long lanes = pieces * cols / V;
  const long lane = (long)blockIdx.x * 32 + (threadIdx.x & 31);
  const bool live = lane < lanes;
  const long at = live ? lane * V : 0;
  const long p = at / cols, c = at % cols;
  Vec acc{};
  if (live) {
    const float* base = x + p * len * cols + c;
#pragma unroll 4
    for (long r = threadIdx.x >> 5; r < len; r += PARTS) {
      if constexpr (V == 4) {
        const float4 v = *reinterpret_cast<const float4*>(base + r * cols);
        acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
      } else {
        acc += base[r * cols];
      }
    }
  }
  s[threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x < 32 && live) {
    for (int k = 1; k < PARTS; ++k) {
      const Vec o = s[k * 32 + threadIdx.x];
      if constexpr (V == 4)
        acc.x += o.x, acc.y += o.y, acc.z += o.z, acc.w += o.w;
      else
        acc += o;
    }
    *reinterpret_cast<Vec*>(part + at) = acc;
  }
}

// A thread per V consecutive columns of one piece, folding the piece's rows in order: a block's
// 256 threads read 256 * V consecutive floats of each row (as a copy does), no shared memory.
template <int V>
__global__ void partials_by_thread(const float* __restrict__ x, float* __restrict__ part,
                                   long cols, long len, long pieces) {
  using Vec = typename std::conditional<V == 4, float4, float>::type;
  const long per_piece = cols / V;
  const long t = (long)blockIdx.x * 256 + threadIdx.x;
  if (t >= pieces * per_piece) return;
  const long p = t / per_piece, c = (t % per_piece) * V;
  const float* base = x + p * len * cols + c;
  Vec acc{};
#pragma unroll 8
  for (long r = 0; r < len; ++r) {
    const Vec v = *reinterpret_cast<const Vec*>(base + r * cols);
    if constexpr (V == 4)
      acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
    else
      acc += v;
  }
  *reinterpret_cast<Vec*>(part + p * cols + c) = acc;
}

__global__ void finish(const float* __restrict__ part, float* __restrict__ out, long cols,
                       long pieces) {
  const long c = (long)blockIdx.x * 256 + threadIdx.x;
  if (c >= cols) return;
  float acc = 0;
  for (long p = 0; p < pieces; ++p) acc += part[p * cols + c];
  out[c] = acc;
}

// Times `partials` followed by the final sum, checks the sums against `want`, and prints a row
// labelled `variant`.
template <typename Partials>
void measure(Timer& timer, const char* variant, unsigned grid, Partials partials, float* part,
             float* out, long rows, long cols, long pieces, const std::vector<double>& want) {
  const double ms = timer.median_ms([&] {
    partials();
    finish<<<static_cast<unsigned>((cols + 255) / 256), 256>>>(part, out, cols, pieces);
  });
  std::vector<float> got(cols);
  CHECK(cudaMemcpy(got.data(), out, cols * sizeof(float), cudaMemcpyDeviceToHost));
  double worst = 0;
  for (long c = 0; c < cols; ++c)
    worst = std::max(worst, std::abs(got[c] - want[c]) / (std::abs(want[c]) + 1));
  std::printf("  %4ld x %4ld  %-22s pieces=%3ld  blocks=%6u  %8.4f ms  %6.0f GB/s  %s\n", rows,
              cols, variant, pieces, grid, ms, rows * cols * 4.0 / (ms * 1e-3) / 1e9,
              worst < 1e-3 ? "ok" : "WRONG");
}

template <int V, int PARTS>
void run(Timer& timer, const float* x, float* part, float* out, long rows, long cols,
         long pieces, const std::vector<double>& want) {
  const unsigned grid = static_cast<unsigned>((pieces * cols / V + 31) / 32);
  char variant[32];
  std::snprintf(variant, sizeof variant, "V=%d  parts=%2d", V, PARTS);
  measure(timer, variant, grid, [&] {
    partials<V, PARTS><<<grid, 32 * PARTS>>>(x, part, cols, rows / pieces, pieces);
  }, part, out, rows, cols, pieces, want);
}

template <int V>
void run_by_thread(Timer& timer, const float* x, float* part, float* out, long rows, long cols,
                   long pieces, const std::vector<double>& want) {
  const unsigned grid = static_cast<unsigned>((pieces * cols / V + 255) / 256);
  char variant[32];
  std::snprintf(variant, sizeof variant, "by thread V=%d", V);
  measure(timer, variant, grid, [&] {
    partials_by_thread<V><<<grid, 256>>>(x, part, cols, rows / pieces, pieces);
  }, part, out, rows, cols, pieces, want);
}

int main() {
  Timer timer;
  for (long cols : {4096L, 1024L}) {
    const long rows = 4096;
    std::vector<float> host(rows * cols);
    unsigned s = 12345;
    for (float& v : host) v = (s = s * 1664525u + 1013904223u) / 4294967296.0f - 0.5f;
    std::vector<double> want(cols, 0.0);
    for (long r = 0; r < rows; ++r)
      for (long c = 0; c < cols; ++c) want[c] += host[r * cols + c];
    float *x, *part, *out;
    CHECK(cudaMalloc(&x, host.size() * sizeof(float)));
    CHECK(cudaMalloc(&part, 512 * cols * sizeof(float)));
    CHECK(cudaMalloc(&out, cols * sizeof(float)));
    CHECK(cudaMemcpy(x, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
    // Reading the input alone, for scale: a copy of it.
    float* copy;
    CHECK(cudaMalloc(&copy, host.size() * sizeof(float)));
    const double copy_ms = timer.median_ms([&] {
      CHECK(cudaMemcpyAsync(copy, x, host.size() * sizeof(float), cudaMemcpyDeviceToDevice));
    });
    std::printf("[%ld, %ld]: copy %.4f ms (%.0f GB/s read + written)\n", rows, cols, copy_ms,
                2.0 * rows * cols * 4 / (copy_ms * 1e-3) / 1e9);
    for (long pieces : {32L, 64L, 128L, 256L, 512L}) {
      run_by_thread<1>(timer, x, part, out, rows, cols, pieces, want);
      run_by_thread<4>(timer, x, part, out, rows, cols, pieces, want);
    }
    for (long pieces : {32L, 16L, 8L}) {
      run<1, 16>(timer, x, part, out, rows, cols, pieces, want);  // coil's kernel at P pieces
      run<1, 8>(timer, x, part, out, rows, cols, pieces, want);
      run<4, 16>(timer, x, part, out, rows, cols, pieces, want);
      run<4, 8>(timer, x, part, out, rows, cols, pieces, want);
    }
    CHECK(cudaFree(x));
    CHECK(cudaFree(part));
    CHECK(cudaFree(out));
    CHECK(cudaFree(copy));
  }
  return 0;
}
