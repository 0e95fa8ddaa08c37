// What holds coil's GPU row kernels (layernorm_gelu over 8192 x 1024, softmax over 8192 x 4096)
// under the copy of the same bytes? coil's generated kernels as they are now
// (row_kernels_generated.cuh, which the build writes with `coil codegen --source` from
// row_kernels_layer_norm_gelu.graph and row_kernels_softmax.graph, launched as their text says)
// and as they were (row_kernels_looped.cuh, "looped": a warp per row of 1024, a block per row of
// 4096, each pass over the row reading it again from memory or L1), against hand-written ones
// that keep the row in registers (V float4s a thread, T threads a row, R rows a block), each
// checked against the looped one and timed in device time (CUDA events behind an L2-emptying
// write, as coil-bench does) next to a plain copy. Built with -DCOIL_BUILD_PROBES=ON (`ninja
// probe_row_kernels`, which generates the header first); by hand, after the build wrote it:
//
//   nvcc -O3 -arch=sm_90 -I build/bench/probes bench/probes/row_kernels.cu -o /tmp/row_kernels
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "cuda_timer.cuh"

#include "row_kernels_generated.cuh"
#include "row_kernels_looped.cuh"

// The sum (or maximum) over the T threads of a row (R rows a block, T a multiple of 32), in
// every one of them; smem holds R * T / 32 floats and is used once.
template <int T, bool kMax>
__device__ __forceinline__ float row_all_reduce(float v, float* smem) {
  for (int o = 16; o > 0; o >>= 1) {
    const float u = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, u) : v + u;
  }
  if constexpr (T == 32) return v;
  const int g = threadIdx.x / T, w = (threadIdx.x % T) / 32;
  if ((threadIdx.x & 31) == 0) smem[g * (T / 32) + w] = v;
  __syncthreads();
  float r = smem[g * (T / 32)];
#pragma unroll
  for (int i = 1; i < T / 32; ++i)
    r = kMax ? fmaxf(r, smem[g * (T / 32) + i]) : r + smem[g * (T / 32) + i];
  return r;
}

__device__ __forceinline__ float gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678f)); }

// gelu(layer_norm(x)) over rows of T * V * 4, the row read once into registers.
template <int T, int V, int R>
__global__ void __launch_bounds__(T* R)
    ln_gelu_regs(const float* __restrict__ x, const float* __restrict__ w,
                 const float* __restrict__ b, float* __restrict__ y, long rows) {
  constexpr int L = T * V * 4;
  __shared__ float smem[2][R * (T / 32 > 1 ? T / 32 : 1)];
  const long row = static_cast<long>(blockIdx.x) * R + threadIdx.x / T;
  if (T == 32 && row >= rows) return;  // (a block per row never has a row past the end)
  const int t = threadIdx.x % T;
  const float4* xr = reinterpret_cast<const float4*>(x + row * L);
  float4 v[V];
#pragma unroll
  for (int k = 0; k < V; ++k) v[k] = xr[k * T + t];
  float s = 0;
#pragma unroll
  for (int k = 0; k < V; ++k) s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
  const float mean = row_all_reduce<T, false>(s, smem[0]) / L;
  float q = 0;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const float a = v[k].x - mean, c = v[k].y - mean, d = v[k].z - mean, e = v[k].w - mean;
    q += (a * a + c * c) + (d * d + e * e);
  }
  const float rstd = rsqrtf(row_all_reduce<T, false>(q, smem[1]) / L + 1e-5f);
  float4* yr = reinterpret_cast<float4*>(y + row * L);
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const float4 wk = reinterpret_cast<const float4*>(w)[k * T + t];
    const float4 bk = reinterpret_cast<const float4*>(b)[k * T + t];
    yr[k * T + t] = make_float4(
        gelu((v[k].x - mean) * rstd * wk.x + bk.x), gelu((v[k].y - mean) * rstd * wk.y + bk.y),
        gelu((v[k].z - mean) * rstd * wk.z + bk.z), gelu((v[k].w - mean) * rstd * wk.w + bk.w));
  }
}

// softmax over rows of T * V * 4, the row read once into registers.
template <int T, int V, int R>
__global__ void __launch_bounds__(T* R)
    softmax_regs(const float* __restrict__ x, float* __restrict__ y, long rows) {
  constexpr int L = T * V * 4;
  __shared__ float smem[2][R * (T / 32 > 1 ? T / 32 : 1)];
  const long row = static_cast<long>(blockIdx.x) * R + threadIdx.x / T;
  if (T == 32 && row >= rows) return;
  const int t = threadIdx.x % T;
  const float4* xr = reinterpret_cast<const float4*>(x + row * L);
  float4 v[V];
#pragma unroll
  for (int k = 0; k < V; ++k) v[k] = xr[k * T + t];
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < V; ++k) m = fmaxf(m, fmaxf(fmaxf(v[k].x, v[k].y), fmaxf(v[k].z, v[k].w)));
  m = row_all_reduce<T, true>(m, smem[0]);
  float s = 0;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    v[k] = make_float4(expf(v[k].x - m), expf(v[k].y - m), expf(v[k].z - m), expf(v[k].w - m));
    s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
  }
  const float inv = 1.0f / row_all_reduce<T, false>(s, smem[1]);
  float4* yr = reinterpret_cast<float4*>(y + row * L);
#pragma unroll
  for (int k = 0; k < V; ++k)
    yr[k * T + t] = make_float4(v[k].x * inv, v[k].y * inv, v[k].z * inv, v[k].w * inv);
}

__global__ void __launch_bounds__(256)
    copy4(const float4* __restrict__ x, float4* __restrict__ y, long n4) {
  const long i = static_cast<long>(blockIdx.x) * 256 + threadIdx.x;
  if (i < n4) y[i] = x[i];
}

std::vector<float> fetch(const float* d, size_t n) {
  std::vector<float> h(n);
  CHECK(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
  return h;
}

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  Timer timer;
  const long rows = 8192;
  const size_t most = size_t(rows) * 4096;
  float *x, *y, *want, *w, *b;
  CHECK(cudaMalloc(&x, most * 4));
  CHECK(cudaMalloc(&y, most * 4));
  CHECK(cudaMalloc(&want, most * 4));
  CHECK(cudaMalloc(&w, 4096 * 4));
  CHECK(cudaMalloc(&b, 4096 * 4));
  {
    std::vector<float> h(most);
    unsigned s = 1;
    for (float& f : h) f = ((s = s * 1664525u + 1013904223u) >> 8) * (1.0f / (1 << 24)) * 4 - 2;
    CHECK(cudaMemcpy(x, h.data(), most * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(w, h.data() + 7, 4096 * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(b, h.data() + 9999, 4096 * 4, cudaMemcpyHostToDevice));
  }
  std::printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  for (int which = 0; which < 2; ++which) {
    const long L = which == 0 ? 1024 : 4096;
    const size_t n = size_t(rows) * L;
    const double bytes = 2.0 * n * 4;
    const double copy = timer.median_ms(
        [&] { copy4<<<(n / 4 + 255) / 256, 256>>>((const float4*)x, (float4*)y, n / 4); }, 60);
    std::printf("\n== %s over %ld x %ld: %.1f MB moved; copy of those bytes %.4f ms\n",
                which == 0 ? "layernorm_gelu" : "softmax", rows, L, bytes / 1e6, copy);
    if (which == 0)
      red_fused_sum_var_div_sub_add_rsqrt_mul_erf_0_looped<<<rows / 8, 256>>>(x, w, b, want);
    else
      red_fused_amax_sub_exp_sum_div_0_looped<<<rows, 256>>>(x, want);
    CHECK(cudaDeviceSynchronize());
    const std::vector<float> ref = fetch(want, n);
    auto report = [&](const char* name, auto launch) {
      CHECK(cudaMemset(y, 0, n * 4));
      launch();
      CHECK(cudaDeviceSynchronize());
      const std::vector<float> got = fetch(y, n);
      double err = 0;
      for (size_t i = 0; i < n; ++i) err = std::max(err, (double)std::fabs(got[i] - ref[i]));
      const double ms = timer.median_ms(launch, 60);
      std::printf("%-40s %.4f ms  %5.1f%% of the copy  max |diff| %.2g\n", name, ms,
                  100 * copy / ms, err);
    };
    report("coil generated, looped (before)", [&] {
      if (which == 0)
        red_fused_sum_var_div_sub_add_rsqrt_mul_erf_0_looped<<<rows / 8, 256>>>(x, w, b, y);
      else
        red_fused_amax_sub_exp_sum_div_0_looped<<<rows, 256>>>(x, y);
    });
    report("coil generated, registers (now)", [&] {
      if (which == 0)
        red_fused_sum_var_div_sub_add_rsqrt_mul_erf_0<<<rows / LAYER_NORM_GELU_ROWS,
                                                        LAYER_NORM_GELU_THREADS>>>(x, w, b, y);
      else
        red_fused_amax_sub_exp_sum_div_0<<<rows / SOFTMAX_ROWS, SOFTMAX_THREADS>>>(x, y);
    });
#define LN(T, V, R)                           \
  report("registers T=" #T " V=" #V " R=" #R, \
         [&] { ln_gelu_regs<T, V, R><<<rows / R, T * R>>>(x, w, b, y, rows); })
#define SM(T, V, R)                           \
  report("registers T=" #T " V=" #V " R=" #R, \
         [&] { softmax_regs<T, V, R><<<rows / R, T * R>>>(x, y, rows); })
    if (which == 0) {
      LN(32, 8, 8);
      LN(32, 8, 4);
      LN(32, 8, 2);
      LN(64, 4, 4);
      LN(128, 2, 2);
      LN(128, 2, 1);
      LN(256, 1, 1);
      LN(256, 1, 2);
    } else {
      SM(256, 4, 1);
      SM(512, 2, 1);
      SM(1024, 1, 1);
      SM(128, 8, 1);
      SM(128, 8, 2);
    }
    CHECK(cudaGetLastError());
  }
  return 0;
}
