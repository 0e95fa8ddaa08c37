// What the few long rows of long_rows_sum (sum(x, dim=1) over 8 rows of 4M floats) need to come
// near the GPU's read bandwidth: hand-written split reductions, each timed in device time (CUDA
// events behind an L2-emptying write, as coil-bench does) and checked against a float64 sum.
// coil generates PIECES = 256 partials a row, blocks of 256 threads striding over their piece
// one float4 at a time (U = 1), then a kernel summing each row's partials (a warp a row). The
// variants: float4 loads in flight per thread (U, each into its own accumulator), pieces a row,
// block size, and the partials summed by the last block of each row to finish (one launch: a
// counter per row, the partials summed in order, so the result does not depend on timing).
//
//   nvcc -O3 -arch=sm_90 bench/probes/long_rows.cu -o /tmp/long_rows && /tmp/long_rows
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda_timer.cuh"

constexpr int kRows = 8;
constexpr long kLen = 4L << 20;

template <int BLOCK>
__device__ float block_sum(float v) {
  __shared__ float warp_sums[BLOCK / 32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  v = 0;
  for (int w = 0; w < BLOCK / 32; ++w) v += warp_sums[w];
  return v;
}

// How a float4 is read: 0 plain; 1 streaming (__ldcs, ld.global.cs); 2 with a 256-byte L2
// prefetch hint; 3 L1 evict-first behind an L2 evict-first cache policy (what Triton emits for
// Inductor's eviction_policy='evict_first').
template <int LOAD>
__device__ __forceinline__ float4 load4(const float* p) {
  if constexpr (LOAD == 1) {
    return __ldcs(reinterpret_cast<const float4*>(p));
  } else if constexpr (LOAD == 2) {
    float4 v;
    asm volatile("ld.global.L2::256B.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "l"(p));
    return v;
  } else if constexpr (LOAD == 3) {
    float4 v;
    unsigned long long policy;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    asm volatile("ld.global.L1::evict_first.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "l"(p), "l"(policy));
    return v;
  } else {
    return *reinterpret_cast<const float4*>(p);
  }
}

// Block b sums piece b % pieces of row b / pieces; with LAST, the last block of a row to finish
// also sums the row's partials.
template <int BLOCK, int U, bool LAST, int LOAD = 0>
__global__ void __launch_bounds__(BLOCK)
    partials(const float* __restrict__ x, float* __restrict__ part, float* __restrict__ out,
             unsigned* __restrict__ done, int pieces) {
  const int row = blockIdx.x / pieces, piece = blockIdx.x % pieces;
  const long len = kLen / pieces;
  const float* p = x + row * kLen + piece * len;
  float acc[U] = {};
  for (long base = threadIdx.x * 4L; base < len; base += BLOCK * 4L * U) {
    float4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      v[u] = base + u * BLOCK * 4L < len ? load4<LOAD>(p + base + u * BLOCK * 4L)
                                         : make_float4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < U; ++u) acc[u] += (v[u].x + v[u].y) + (v[u].z + v[u].w);
  }
  float s = 0;
#pragma unroll
  for (int u = 0; u < U; ++u) s += acc[u];
  s = block_sum<BLOCK>(s);
  if (threadIdx.x == 0) part[blockIdx.x] = s;
  if (!LAST) return;
  __shared__ bool last;
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(&done[row], 1u) == static_cast<unsigned>(pieces - 1);
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  float t = 0;
  for (int i = threadIdx.x; i < pieces; i += BLOCK) t += __ldcg(&part[row * pieces + i]);
  t = block_sum<BLOCK>(t);
  if (threadIdx.x == 0) {
    out[row] = t;
    done[row] = 0;  // ready for the next launch
  }
}

__global__ void finish(const float* __restrict__ part, float* __restrict__ out, int pieces) {
  float t = 0;
  for (int i = threadIdx.x; i < pieces; i += 32) t += part[blockIdx.x * pieces + i];
  for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  if (threadIdx.x == 0) out[blockIdx.x] = t;
}

// The read alone: every float4 once, one store a block (the bound any of the above can reach).
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) read_all(const float* __restrict__ x, float* out) {
  const long i = (blockIdx.x * static_cast<long>(BLOCK) + threadIdx.x) * 4;
  float4 v = *reinterpret_cast<const float4*>(x + i);
  float s = block_sum<BLOCK>(v.x + v.y + v.z + v.w);
  if (threadIdx.x == 0 && s == 12345.f) out[0] = s;
}

int main() {
  const long n = kRows * kLen;
  std::vector<float> host(n);
  unsigned seed = 1;
  for (long i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    host[i] = static_cast<float>(seed >> 8) / 16777216.0f - 0.5f;
  }
  std::vector<double> want(kRows, 0.0);
  for (long i = 0; i < n; ++i) want[i / kLen] += host[i];
  float *x, *part, *out;
  unsigned* done;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMalloc(&part, kRows * 4096 * sizeof(float)));
  CHECK(cudaMalloc(&out, kRows * sizeof(float)));
  CHECK(cudaMalloc(&done, kRows * sizeof(unsigned)));
  CHECK(cudaMemset(done, 0, kRows * sizeof(unsigned)));
  CHECK(cudaMemcpy(x, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  Timer timer;
  const double bytes = n * 4.0;
  auto report = [&](const char* name, int pieces, double ms) {
    std::vector<float> got(kRows);
    CHECK(cudaMemcpy(got.data(), out, sizeof got[0] * kRows, cudaMemcpyDeviceToHost));
    double err = 0;
    for (int r = 0; r < kRows; ++r) err = std::fmax(err, std::fabs(got[r] - want[r]));
    std::printf("%-34s pieces %5d  %.4f ms  %6.0f GB/s  max |err| %.2e\n", name, pieces, ms,
                bytes / ms / 1e6, err);
  };
  const double read_ms = timer.median_ms([&] { read_all<256><<<n / 1024, 256>>>(x, out); });
  std::printf("%-34s              %.4f ms  %6.0f GB/s\n", "read alone (256 threads, 1 float4)",
              read_ms, bytes / read_ms / 1e6);
#define VARIANT_LOAD(BLOCK, U, LAST, PIECES, LOAD)                                             \
  {                                                                                            \
    const int pieces = PIECES;                                                                 \
    double ms = timer.median_ms([&] {                                                          \
      partials<BLOCK, U, LAST, LOAD><<<kRows * pieces, BLOCK>>>(x, part, out, done, pieces);   \
      if (!LAST) finish<<<kRows, 32>>>(part, out, pieces);                                     \
    });                                                                                        \
    report((std::string(#BLOCK " threads, U " #U) + (LAST ? ", last block" : ", two kernels") + \
            (LOAD ? ", load " #LOAD : ""))                                                     \
               .c_str(),                                                                       \
           pieces, ms);                                                                        \
  }
#define VARIANT(BLOCK, U, LAST, PIECES) VARIANT_LOAD(BLOCK, U, LAST, PIECES, 0)
  VARIANT(256, 1, false, 256)  // coil's kernels
  VARIANT(256, 1, true, 256)
  VARIANT(256, 2, false, 256)
  VARIANT(256, 4, false, 256)
  VARIANT(256, 4, true, 256)
  VARIANT(256, 4, false, 128)
  VARIANT(256, 4, true, 128)
  VARIANT(256, 2, false, 512)
  VARIANT(256, 2, true, 512)
  VARIANT(256, 4, true, 512)
  VARIANT(256, 1, true, 1024)
  VARIANT(256, 2, true, 1024)
  VARIANT(512, 4, true, 128)
  VARIANT(512, 2, true, 256)
  VARIANT(1024, 2, true, 128)
  VARIANT(128, 4, true, 512)
  // Fewer, longer pieces: about a wave of blocks (Inductor's split reduction aims at half the
  // GPU's threads, 64 pieces a row here, and finishes in a second kernel).
  VARIANT(256, 2, false, 64)
  VARIANT(256, 2, true, 64)
  VARIANT(256, 4, true, 64)
  VARIANT(512, 4, true, 64)
  VARIANT(256, 4, true, 32)
  VARIANT(1024, 4, true, 32)
  // The loads' cache hints (see load4), on coil's split and on Inductor's.
  VARIANT_LOAD(256, 1, false, 256, 1)
  VARIANT_LOAD(256, 1, false, 256, 2)
  VARIANT_LOAD(256, 1, false, 256, 3)
  VARIANT_LOAD(256, 2, false, 64, 1)
  VARIANT_LOAD(256, 2, false, 64, 2)
  VARIANT_LOAD(256, 2, false, 64, 3)
  VARIANT_LOAD(256, 4, true, 64, 3)
  return 0;
}
