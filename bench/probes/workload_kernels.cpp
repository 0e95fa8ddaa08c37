// One coil-bench workload's GPU kernels: the compiled (or eager) program is called a few times,
// then once more with the CUDA profiler switched on, behind a write that empties the L2 cache
// as coil-bench's device time does. Run under Nsight Compute with --profile-from-start off, it
// gives the call's kernels and library calls one by one (bench/device_workload_kernels.sh).
//   workload_kernels WORKLOAD [compiled|eager]
#include <coil/coil.h>
#include <coil/cuda.h>
#include <cuda_profiler_api.h>

#include <cstdio>
#include <string>

#include "../workloads.h"

int main(int argc, char** argv) {
  using namespace coil;
  if (argc < 2) {
    std::fprintf(stderr, "usage: workload_kernels WORKLOAD [compiled|eager]\n");
    return 1;
  }
  const std::string name = argv[1];
  const bool compiled = argc < 3 || std::string(argv[2]) == "compiled";
  bench::use_device(Device("cuda:0"));
  for (const bench::Workload& w : bench::workloads()) {
    if (w.name != name) continue;
    std::vector<Tensor> in = w.inputs(true);
    bench::Program f = compiled ? w.compiled(true) : w.eager(true);
    Tensor flush = empty({64 << 20}, kFloat32, Device("cuda:0"));
    for (int i = 0; i < 3; ++i) f(in);
    flush.zero_();
    cudaProfilerStart();
    f(in);
    cuda::synchronize();
    cudaProfilerStop();
    std::printf("%s %s: one call profiled\n", name.c_str(), compiled ? "compiled" : "eager");
    return 0;
  }
  std::fprintf(stderr, "no workload named %s\n", name.c_str());
  return 1;
}
