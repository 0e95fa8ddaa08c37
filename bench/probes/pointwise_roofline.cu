// What a memory-bound pointwise kernel needs to come near the GPU's copy roofline: hand-written
// variants of bn_relu's kernel (y = relu(x * scale[c] + shift[c]) over NCHW) and of a plain
// copy, each timed in device time (CUDA events behind an L2-emptying write, as coil-bench does)
// against the driver's device-to-device copy of 1 GiB. The variants: float4s per thread (U),
// streaming loads and stores (__ldcs/__stcs: evict-first), block size, and a grid-stride loop
// over a few waves of blocks. coil's CUDA pointwise kernels are U = 1, 256 threads.
//
//   nvcc -O3 -arch=sm_90 bench/probes/pointwise_roofline.cu -o /tmp/pointwise_roofline
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "cuda_timer.cuh"

__device__ __forceinline__ float4 load4(const float* p, bool stream) {
  return stream ? __ldcs(reinterpret_cast<const float4*>(p)) : *reinterpret_cast<const float4*>(p);
}
__device__ __forceinline__ void store4(float* p, float4 v, bool stream) {
  if (stream)
    __stcs(reinterpret_cast<float4*>(p), v);
  else
    *reinterpret_cast<float4*>(p) = v;
}

// bn_relu of the four elements from flat index i of an NCHW tensor (planes of hw, c channels).
__device__ __forceinline__ float4 bn_relu4(float4 o, long i, const float* __restrict__ scale,
                                           const float* __restrict__ shift, int hw, int c) {
  const int ch = static_cast<int>((i / hw) % c);
  const float s = scale[ch], b = shift[ch];
  return make_float4(fmaxf(o.x * s + b, 0.f), fmaxf(o.y * s + b, 0.f), fmaxf(o.z * s + b, 0.f),
                     fmaxf(o.w * s + b, 0.f));
}

// `op` 0: copy; 1: bn_relu. Each thread takes U float4s, BLOCK * 4 elements apart (coalesced);
// all U loads are issued before any is used.
template <int U, int BLOCK, bool STREAM>
__global__ void __launch_bounds__(BLOCK)
    pointwise(const float* __restrict__ x, const float* __restrict__ scale,
              const float* __restrict__ shift, float* __restrict__ y, long n, int hw, int c,
              int op) {
  const long base = (static_cast<long>(blockIdx.x) * U * BLOCK + threadIdx.x) * 4;
  float4 v[U];
#pragma unroll
  for (int k = 0; k < U; ++k) {
    const long i = base + static_cast<long>(k) * BLOCK * 4;
    if (i + 4 <= n) v[k] = load4(x + i, STREAM);
  }
#pragma unroll
  for (int k = 0; k < U; ++k) {
    const long i = base + static_cast<long>(k) * BLOCK * 4;
    if (i + 4 > n) continue;
    float4 o = v[k];
    if (op == 1) o = bn_relu4(o, i, scale, shift, hw, c);
    store4(y + i, o, STREAM);
  }
}

// A grid-stride loop: `gridDim.x` blocks (a few per SM) walk the whole tensor, a float4 each.
template <bool STREAM>
__global__ void __launch_bounds__(256)
    grid_stride(const float* __restrict__ x, const float* __restrict__ scale,
                const float* __restrict__ shift, float* __restrict__ y, long n, int hw, int c,
                int op) {
  for (long i = (static_cast<long>(blockIdx.x) * 256 + threadIdx.x) * 4; i + 4 <= n;
       i += static_cast<long>(gridDim.x) * 256 * 4) {
    float4 o = load4(x + i, STREAM);
    if (op == 1) o = bn_relu4(o, i, scale, shift, hw, c);
    store4(y + i, o, STREAM);
  }
}

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  Timer timer;
  const size_t big = size_t{1} << 30;
  float *src, *dst;
  CHECK(cudaMalloc(&src, big));
  CHECK(cudaMalloc(&dst, big));
  CHECK(cudaMemset(src, 0, big));
  const double copy_ms =
      timer.median_ms([&] { CHECK(cudaMemcpyAsync(dst, src, big, cudaMemcpyDeviceToDevice)); }, 10);
  const double roof = 2.0 * big / (copy_ms * 1e-3);  // bytes read + written per second
  std::printf("%s, %d SMs: driver copy of 1 GiB %.3f ms = %.0f GB/s (read + write)\n", prop.name,
              prop.multiProcessorCount, copy_ms, roof / 1e9);
  float *scale, *shift;
  CHECK(cudaMalloc(&scale, 4096 * sizeof(float)));
  CHECK(cudaMalloc(&shift, 4096 * sizeof(float)));
  CHECK(cudaMemset(scale, 0, 4096 * sizeof(float)));
  CHECK(cudaMemset(shift, 0, 4096 * sizeof(float)));

  struct Size {
    const char* what;
    long n;
    int hw, c;
  };
  // The float32 workloads' sizes, then their bytes in bfloat16 (half as many floats).
  for (Size s : {Size{"bn_relu 32x64x56x56", 32L * 64 * 56 * 56, 56 * 56, 64},
                 Size{"sincos 16M", 16L << 20, 56 * 56, 64},
                 Size{"softmax 8192x4096", 8192L * 4096, 56 * 56, 64},
                 Size{"bn_relu 32x64x56x56, bf16's bytes", 16L * 64 * 56 * 56, 56 * 56, 64},
                 Size{"sincos 16M, bf16's bytes", 8L << 20, 56 * 56, 64},
                 Size{"softmax 8192x4096, bf16's bytes", 4096L * 4096, 56 * 56, 64}}) {
    const double bytes = 2.0 * s.n * sizeof(float);
    std::printf("\n== %s: %.1f MB moved; at the copy's rate %.4f ms\n", s.what, bytes / 1e6,
                bytes / roof * 1e3);
    for (int op : {0, 1}) {
      auto report = [&](const char* name, double ms) {
        std::printf("%-8s %-34s %.4f ms  %5.1f%% of the copy roofline\n", op ? "bn_relu" : "copy",
                    name, ms, 100 * bytes / roof / (ms * 1e-3));
      };
      auto blocks = [&](int per_block) {
        return static_cast<unsigned>((s.n / 4 + per_block - 1) / per_block);
      };
#define VARIANT(U, B, ST)                                                                 \
  report("U=" #U " block=" #B " stream=" #ST, timer.median_ms([&] {                       \
    pointwise<U, B, ST><<<blocks(U* B), B>>>(src, scale, shift, dst, s.n, s.hw, s.c, op); \
  }))
      VARIANT(1, 256, false);
      VARIANT(2, 256, false);
      VARIANT(4, 256, false);
      VARIANT(8, 256, false);
      VARIANT(1, 256, true);
      VARIANT(2, 256, true);
      VARIANT(4, 256, true);
      VARIANT(1, 128, false);
      VARIANT(4, 128, false);
      VARIANT(2, 512, false);
      VARIANT(1, 1024, false);
#undef VARIANT
      for (int waves : {2, 4, 8}) {
        const unsigned grid = static_cast<unsigned>(prop.multiProcessorCount * waves);
        char name[64];
        std::snprintf(name, sizeof name, "grid-stride %d blocks/SM", waves);
        report(name, timer.median_ms([&] {
          grid_stride<false><<<grid, 256>>>(src, scale, shift, dst, s.n, s.hw, s.c, op);
        }));
      }
      CHECK(cudaGetLastError());
    }
  }
  return 0;
}
