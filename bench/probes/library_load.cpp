// What a new process pays before its first cuBLASLt product and its first cuDNN convolution,
// outside coil: the CUDA context, loading each library and creating its handle, and the first
// and second calls at mm_softmax's product (2048³, float32) and conv_block's convolution
// (32 x 64 x 56², 64 filters of 3², padding 1). The libraries are opened as coil opens them
// (dlopen, RTLD_NOW). The floor under a warm new process's first call of those workloads
// (bench/probes/torch_library_load.py times PyTorch's). Built by -DCOIL_BUILD_PROBES=ON, or:
//   g++ -O2 -I/usr/local/cuda/include bench/probes/library_load.cpp -L/usr/local/cuda/lib64 \
//     -lcudart -ldl -Wl,-rpath,/usr/local/cuda/lib64 -o build/probes/library_load
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace {

// The libraries' functions this probe calls, each named once: declared as pointers here and
// found with dlsym once its library is open.
// clang-format off
#define CUBLASLT_FUNCTIONS(X)                                                         \
  X(cublasLtCreate) X(cublasLtMatmulDescCreate) X(cublasLtMatrixLayoutCreate)         \
  X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceSetAttribute)           \
  X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)
#define CUDNN_FUNCTIONS(X)                                                            \
  X(cudnnCreate) X(cudnnCreateTensorDescriptor) X(cudnnCreateFilterDescriptor)        \
  X(cudnnCreateConvolutionDescriptor) X(cudnnSetTensor4dDescriptor)                   \
  X(cudnnSetFilter4dDescriptor) X(cudnnSetConvolution2dDescriptor)                    \
  X(cudnnGetConvolutionForwardAlgorithm_v7) X(cudnnConvolutionForward)
// clang-format on
#define COIL_DECLARE(name) decltype(&name) name##_ = nullptr;
CUBLASLT_FUNCTIONS(COIL_DECLARE)
CUDNN_FUNCTIONS(COIL_DECLARE)
#define COIL_FIND(name) name##_ = reinterpret_cast<decltype(&name)>(dlsym(lib, #name));

double ms_since(std::chrono::steady_clock::time_point& t) {
  const auto now = std::chrono::steady_clock::now();
  const double ms = std::chrono::duration<double, std::milli>(now - t).count();
  t = now;
  return ms;
}

void product(cublasLtHandle_t h, const float* a, float* c, void* ws, size_t ws_bytes, int n) {
  cublasLtMatmulDesc_t desc;
  cublasLtMatmulDescCreate_(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatrixLayout_t l;
  cublasLtMatrixLayoutCreate_(&l, CUDA_R_32F, n, n, n);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate_(&pref);
  cublasLtMatmulPreferenceSetAttribute_(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                        sizeof ws_bytes);
  cublasLtMatmulHeuristicResult_t best;
  int found = 0;
  cublasLtMatmulAlgoGetHeuristic_(h, desc, l, l, l, l, pref, 1, &best, &found);
  const float one = 1, zero = 0;
  cublasLtMatmul_(h, desc, &one, a, l, a, l, &zero, c, l, c, l, &best.algo, ws, ws_bytes, nullptr);
  cudaDeviceSynchronize();
}

void convolution(cudnnHandle_t h, const float* x, const float* w, float* y, void* ws,
                 size_t ws_bytes) {
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  cudnnCreateTensorDescriptor_(&xd);
  cudnnCreateTensorDescriptor_(&yd);
  cudnnCreateFilterDescriptor_(&wd);
  cudnnCreateConvolutionDescriptor_(&cd);
  cudnnSetTensor4dDescriptor_(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 32, 64, 56, 56);
  cudnnSetTensor4dDescriptor_(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 32, 64, 56, 56);
  cudnnSetFilter4dDescriptor_(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 64, 64, 3, 3);
  cudnnSetConvolution2dDescriptor_(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
  cudnnConvolutionFwdAlgoPerf_t perf;
  int found = 0;
  cudnnGetConvolutionForwardAlgorithm_v7_(h, xd, wd, cd, yd, 1, &found, &perf);
  const float one = 1, zero = 0;
  cudnnConvolutionForward_(h, &one, xd, x, wd, w, cd, perf.algo, ws, ws_bytes, &zero, yd, y);
  cudaDeviceSynchronize();
}

// The library as coil opens it (from the toolkit's folder, else the loader's search path), the
// time that took printed under `label`; nullptr, said so, where it is missing.
void* open_library(const char* name, const char* label, std::chrono::steady_clock::time_point& t) {
  void* lib = dlopen((std::string("/usr/local/cuda/lib64/") + name).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  std::printf("%-34s%8.1f ms\n", (std::string(label) + ": dlopen").c_str(), ms_since(t));
  if (!lib) std::printf("%s: not found\n", label);
  return lib;
}

}  // namespace

int main() {
  auto t = std::chrono::steady_clock::now();
  if (cudaFree(nullptr) != cudaSuccess) {
    std::printf("no GPU\n");
    return 1;
  }
  std::printf("CUDA context                      %8.1f ms\n", ms_since(t));
  const int n = 2048;
  const size_t ws_bytes = size_t{1} << 30;
  float *a, *c, *x, *w, *y;
  void* ws;
  cudaMalloc(&a, sizeof(float) * n * n);
  cudaMalloc(&c, sizeof(float) * n * n);
  cudaMalloc(&x, sizeof(float) * 32 * 64 * 56 * 56);
  cudaMalloc(&y, sizeof(float) * 32 * 64 * 56 * 56);
  cudaMalloc(&w, sizeof(float) * 64 * 64 * 9);
  cudaMalloc(&ws, ws_bytes);
  cudaMemset(a, 0, sizeof(float) * n * n);
  cudaMemset(x, 0, sizeof(float) * 32 * 64 * 56 * 56);
  cudaMemset(w, 0, sizeof(float) * 64 * 64 * 9);
  cudaDeviceSynchronize();
  std::printf("buffers                           %8.1f ms\n", ms_since(t));
  void* lib = open_library("libcublasLt.so.13", "cuBLASLt", t);
  if (!lib) return 1;
  CUBLASLT_FUNCTIONS(COIL_FIND)
  cublasLtHandle_t lt;
  cublasLtCreate_(&lt);
  std::printf("cuBLASLt: handle                  %8.1f ms\n", ms_since(t));
  product(lt, a, c, ws, ws_bytes, n);
  std::printf("cuBLASLt: first 2048^3 product    %8.1f ms\n", ms_since(t));
  product(lt, a, c, ws, ws_bytes, n);
  std::printf("cuBLASLt: second                  %8.1f ms\n", ms_since(t));
  lib = open_library("libcudnn.so.9", "cuDNN", t);
  if (!lib) return 1;
  CUDNN_FUNCTIONS(COIL_FIND)
  cudnnHandle_t dnn;
  cudnnCreate_(&dnn);
  std::printf("cuDNN: handle                     %8.1f ms\n", ms_since(t));
  convolution(dnn, x, w, y, ws, ws_bytes);
  std::printf("cuDNN: first convolution          %8.1f ms\n", ms_since(t));
  convolution(dnn, x, w, y, ws, ws_bytes);
  std::printf("cuDNN: second                     %8.1f ms\n", ms_since(t));
  return 0;
}
