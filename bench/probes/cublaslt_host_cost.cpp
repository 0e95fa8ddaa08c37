// The host cost of cuBLASLt's matmul call alone, for the 64x64 float32 product that
// coil_bench_overhead's BM_EagerMatmulCuda times through coil's eager dispatch: descriptors,
// layouts and the algorithm made once (as coil caches them), then calls in a loop, the GPU
// waited for at the end. Also a loop of cudaMemsetAsync, the cheapest launch the runtime has.
// Build: g++ -O2 -I/usr/local/cuda/include cublaslt_host_cost.cpp -L/usr/local/cuda/lib64
//        -lcublasLt -lcudart
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>

int main() {
  const int n = 64, calls = 20000;
  float *a, *c;
  cudaMalloc(&a, n * n * sizeof(float));
  cudaMalloc(&c, n * n * sizeof(float));
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  cublasLtHandle_t h;
  cublasLtCreate(&h);
  cublasLtMatmulDesc_t desc;
  cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatrixLayout_t l;
  cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, n, n, n);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  size_t ws_bytes = 32 << 20;
  void* ws;
  cudaMalloc(&ws, ws_bytes);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                       sizeof ws_bytes);
  cublasLtMatmulHeuristicResult_t r{};
  int found = 0;
  cublasLtMatmulAlgoGetHeuristic(h, desc, l, l, l, l, pref, 1, &r, &found);
  const float one = 1, zero = 0;
  auto time_us = [&](auto&& f) {
    for (int i = 0; i < 1000; ++i) f();
    cudaStreamSynchronize(stream);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) f();
    cudaStreamSynchronize(stream);
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
               .count() /
           calls;
  };
  double matmul = time_us([&] {
    cublasLtMatmul(h, desc, &one, a, l, a, l, &zero, c, l, c, l, &r.algo, ws, ws_bytes, stream);
  });
  double memset = time_us([&] { cudaMemsetAsync(c, 0, n * n * sizeof(float), stream); });
  std::printf("cublasLtMatmul alone, 64x64 float32: %.2f us per call\n", matmul);
  std::printf("cudaMemsetAsync, 16 KiB: %.2f us per call\n", memset);
  return found > 0 ? 0 : 1;
}
