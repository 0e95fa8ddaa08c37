// A kernel that faults on the GPU: its error shows at a later call on the stream, and the
// coil::Error names the last launch; with COIL_CUDA_SYNC=1 the launch itself fails, naming the
// kernel. Each case runs in a child process (a death test), since the fault spoils the
// process's CUDA context. Built only with CUDA; the suite name keeps it out of the
// compute-sanitizer run, which would report the fault it provokes.
#include <coil/coil.h>
#include <coil/cuda.h>

#include <cstdio>
#include <cstdlib>

#include "backends/cuda/cuda_compiler.h"
#include "backends/cuda/driver.h"
#include "cuda_testing.h"
#include "runtime/tensor_impl.h"

namespace coil::testing {
namespace {

[[noreturn]] void fault(bool sync_each_launch) {
  if (sync_each_launch) setenv("COIL_CUDA_SYNC", "1", 1);
  cuda::NvrtcCompiler compiler(0);
  auto module =
      jit::load("extern \"C\" __global__ void out_of_bounds(float* p) { p[1ll << 40] = 1.0f; }\n",
                compiler, "out_of_bounds");
  Tensor x = zeros({4}).cuda();
  x + 1.0;  // its kernel loaded now: after the fault, loading fails before any launch could
  void* data = x.impl()->data();
  void* args[] = {&data};
  try {
    cuda::launch(static_cast<const cuda::CudaModule&>(*module).function("out_of_bounds"),
                 "out_of_bounds", 0, 1, 1, 0, args);
    Tensor later = x + 1.0;  // queued after the fault: its own launch may report it
    later.cpu();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::exit(0);
  }
  std::exit(1);
}

TEST(GpuFaults, KernelErrorsNameTheLaunch) {
  COIL_REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(fault(false), ::testing::ExitedWithCode(0),
              "CUDA error .*the last work queued on cuda:0 was kernel '[a-z_0-9]+'"
              ".*COIL_CUDA_SYNC=1");
  EXPECT_EXIT(fault(true), ::testing::ExitedWithCode(0),
              "running kernel 'out_of_bounds' \\(COIL_CUDA_SYNC=1\\): CUDA error");
}

}  // namespace
}  // namespace coil::testing
