// The CUDA backend's hand-written kernels (the runtime's copies, fills and random draws, the
// fused attention, cumsum and scatter_add) compile with NVRTC, with no GPU needed: CI checks them
// as it checks the generated kernels.
#include <filesystem>

#include "backends/cuda/cuda_compiler.h"
#include "backends/cuda/flash_attention.h"
#include "backends/cuda/runtime_kernels.h"
#include "backends/cuda/scan_scatter.h"
#include "testing.h"

using namespace coil;

namespace {

std::string nvrtc_errors(const std::string& source) {
  std::string dir = ::testing::TempDir() + "coil-nvrtc-XXXXXX";
  if (!mkdtemp(dir.data())) return "cannot make a temporary folder";
  cuda::NvrtcCompiler compiler(-1);
  jit::Compiler::Outcome out = compiler.compile(source, dir + "/k.cu", dir + "/k.cubin");
  std::filesystem::remove_all(dir);
  return out.ok ? "" : out.log;
}

}  // namespace

TEST(CudaRuntimeKernels, CompileWithNvrtc) {
  for (auto [dst, src] : {std::pair{kFloat32, kFloat32},
                          {kBFloat16, kFloat64},
                          {kFloat16, kInt64},
                          {kBool, kFloat32},
                          {kInt8, kBool}}) {
    SCOPED_TRACE(std::string(dtype_name(src)) + " -> " + dtype_name(dst));
    EXPECT_EQ(nvrtc_errors(cuda::copy_kernel_source(dst, src)), "");
  }
  EXPECT_EQ(nvrtc_errors(cuda::random_kernel_source()), "");
}

// The fused attention's kernel, where its tiles are largest (float64, heads of 128) and where
// its features need padding.
TEST(CudaRuntimeKernels, AttentionCompilesWithNvrtc) {
  EXPECT_EQ(nvrtc_errors(cuda::attention_kernel_source(kFloat64, 128, 128)), "");
  EXPECT_EQ(nvrtc_errors(cuda::attention_kernel_source(kBFloat16, 5, 7)), "");
}

// cumsum (a floating accumulator) and scatter_add's kinds of addition (64-bit integers by the
// hardware's atomics, 16-bit floats by compare-and-swap).
TEST(CudaRuntimeKernels, ScanAndScatterCompileWithNvrtc) {
  EXPECT_EQ(nvrtc_errors(cuda::cumsum_kernel_source(kFloat16)), "");
  EXPECT_EQ(nvrtc_errors(cuda::scatter_add_kernel_source(kInt64, kInt32)), "");
  EXPECT_EQ(nvrtc_errors(cuda::scatter_add_kernel_source(kBFloat16, kInt64)), "");
}
