// The host's cost of what one call of a mode="reduce-overhead" function does on the GPU, each
// alone, without coil: a kernel launch, a 4 KiB device-to-device cudaMemcpyAsync (the copy into
// a static input), the launch of a CUDA graph of one kernel, a copy and a graph launch
// together, and a graph of a copy node and the kernel whose copy's source changes at every
// launch (what coil's replays do). coil_bench_overhead's BM_CompiledAddOneCuda* time the same
// through coil. Build: nvcc -O2 -o cuda_graph_host_cost cuda_graph_host_cost.cu
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>

__global__ void add_one(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + 1;
}

template <typename F>
double per_call_us(cudaStream_t s, F&& call) {
  const int calls = 20000;
  for (int i = 0; i < 100; ++i) call();
  cudaStreamSynchronize(s);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) call();
  auto t1 = std::chrono::steady_clock::now();
  cudaStreamSynchronize(s);
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / calls;
}

int main() {
  const int n = 1024;
  float *x, *x_static, *y;
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&x_static, n * sizeof(float));
  cudaMalloc(&y, n * sizeof(float));
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
  add_one<<<(n + 255) / 256, 256, 0, s>>>(x_static, y, n);
  cudaStreamEndCapture(s, &graph);
  cudaGraphInstantiate(&exec, graph, 0);

  // The copy inside the graph: a memcpy node before the kernel, its source switched per launch.
  float* x2;
  cudaMalloc(&x2, n * sizeof(float));
  cudaGraph_t with_copy;
  cudaGraphExec_t with_copy_exec;
  cudaGraphNode_t copy_node, kernel_node;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
  add_one<<<(n + 255) / 256, 256, 0, s>>>(x_static, y, n);
  cudaStreamEndCapture(s, &with_copy);
  size_t roots = 1;
  cudaGraphGetRootNodes(with_copy, &kernel_node, &roots);
  cudaGraphAddMemcpyNode1D(&copy_node, with_copy, nullptr, 0, x_static, x, n * sizeof(float),
                           cudaMemcpyDeviceToDevice);
  cudaGraphAddDependencies(with_copy, &copy_node, &kernel_node, nullptr, 1);
  cudaGraphInstantiate(&with_copy_exec, with_copy, 0);
  int flip = 0;
  auto switched = [&] {
    cudaGraphExecMemcpyNodeSetParams1D(with_copy_exec, copy_node, x_static, (flip ^= 1) ? x2 : x,
                                       n * sizeof(float), cudaMemcpyDeviceToDevice);
    cudaGraphLaunch(with_copy_exec, s);
  };

  auto kernel = [&] { add_one<<<(n + 255) / 256, 256, 0, s>>>(x, y, n); };
  auto copy = [&] { cudaMemcpyAsync(x_static, x, n * sizeof(float), cudaMemcpyDeviceToDevice, s); };
  auto replay = [&] { cudaGraphLaunch(exec, s); };
  auto both = [&] {
    copy();
    replay();
  };
  for (int round = 0; round < 3; ++round)
    std::printf(
        "kernel launch %.2f us, D2D copy %.2f us, graph launch %.2f us, copy + graph %.2f us, "
        "graph with its copy's source switched %.2f us\n",
        per_call_us(s, kernel), per_call_us(s, copy), per_call_us(s, replay), per_call_us(s, both),
        per_call_us(s, switched));
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
