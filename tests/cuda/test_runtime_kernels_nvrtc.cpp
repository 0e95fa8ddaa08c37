// The CUDA backend's hand-written kernels (the runtime's copies, fills and random draws, the
// fused attention and its backward, max pooling, cumsum and scatter_add) compile with NVRTC, with
// no GPU needed: CI checks them as it checks the generated kernels. And the dividers a launch hands
// a dynamic kernel divide exactly.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <coil/cuda.h>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_compiler.h"
#include "backends/cuda/driver.h"
#include "backends/cuda/flash_attention.h"
#include "backends/cuda/flash_attention_backward.h"
#include "backends/cuda/avg_pool.h"
#include "backends/cuda/max_pool.h"
#include "backends/cuda/runtime_kernels.h"
#include "backends/cuda/scan_scatter.h"
#include "jit/source_parts.h"
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

// The fused attention's kernels: float64's a thread a row, at its largest tiles (heads of 128);
// the tiled one with 16-byte copies (float32, heads of 64 and 128) and without (16-bit floats,
// features that need padding).
TEST(CudaRuntimeKernels, AttentionCompilesWithNvrtc) {
  EXPECT_EQ(nvrtc_errors(cuda::attention_kernel_source(kFloat64, 128, 128)), "");
  EXPECT_EQ(nvrtc_errors(cuda::attention_kernel_source(kFloat32, 64, 64)), "");
  EXPECT_EQ(nvrtc_errors(cuda::attention_kernel_source(kFloat32, 128, 96)), "");
  EXPECT_EQ(nvrtc_errors(cuda::attention_kernel_source(kBFloat16, 5, 7)), "");
  // The backward's two kernels (float32 self-attention).
  EXPECT_EQ(nvrtc_errors(cuda::attention_backward_source(64)), "");
  EXPECT_EQ(nvrtc_errors(cuda::attention_backward_source(40)), "");
}

// cumsum (a floating accumulator) and scatter_add's kinds of addition (64-bit integers by the
// hardware's atomics, 16-bit floats and bytes by compare-and-swap).
TEST(CudaRuntimeKernels, ScanAndScatterCompileWithNvrtc) {
  EXPECT_EQ(nvrtc_errors(cuda::cumsum_kernel_source(kFloat16)), "");
  EXPECT_EQ(nvrtc_errors(cuda::scatter_add_kernel_source(kInt64, kInt32)), "");
  EXPECT_EQ(nvrtc_errors(cuda::scatter_add_kernel_source(kBFloat16, kInt64)), "");
  for (DType t : {kBool, kUInt8, kInt8}) {
    SCOPED_TRACE(dtype_name(t));
    EXPECT_EQ(nvrtc_errors(cuda::scatter_add_kernel_source(t, kInt64)), "");
  }
}

// A large module compiles as several NVRTC programs side by side, bundled into one binary
// whose kernels all load (with a GPU): eight kernels of about 40 KB (mostly a comment) for
// three compile threads.
TEST(CudaRuntimeKernels, LargeModulesCompileInPartsIntoABundle) {
  std::string source = "__device__ inline float twice(float x) { return 2 * x; }\n";
  const std::string padding = "// " + std::string(40 << 10, 'x') + "\n";
  for (int i = 0; i < 8; ++i)
    source += std::string(jit::kPartBoundary) + padding + "extern \"C\" __global__ void k" +
              std::to_string(i) + "(float* x) { x[0] = twice(x[0]); }\n";
  const char* saved = std::getenv("COIL_COMPILE_THREADS");
  const std::string saved_value = saved ? saved : "";
  setenv("COIL_COMPILE_THREADS", "3", 1);
  std::string dir = ::testing::TempDir() + "coil-nvrtc-XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const int device = cuda::is_available() ? 0 : -1;
  cuda::NvrtcCompiler compiler(device);
  jit::Compiler::Outcome out = compiler.compile(source, dir + "/big.cu", dir + "/big.cubin");
  if (saved)
    setenv("COIL_COMPILE_THREADS", saved_value.c_str(), 1);
  else
    unsetenv("COIL_COMPILE_THREADS");
  ASSERT_TRUE(out.ok) << out.log.substr(0, 2000);
  std::ifstream in(dir + "/big.cubin", std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  const std::string binary = bytes.str();
  ASSERT_EQ(binary.substr(0, 12), "coil-cubins\n");
  EXPECT_EQ(static_cast<unsigned char>(binary[12]), 3u) << "not three parts";
  if (device >= 0) {
    cuda::CudaModule module(dir + "/big.cubin", device);
    for (int i = 0; i < 8; ++i) EXPECT_NE(module.function("k" + std::to_string(i)), nullptr);
    EXPECT_THROW(module.function("k8"), Error);
  }
  std::filesystem::remove_all(dir);
}

// Max pooling's kernels: 16-bit floats (compared and summed in float), float64, integers.
TEST(CudaRuntimeKernels, MaxPoolCompilesWithNvrtc) {
  for (DType t : {kFloat32, kFloat64, kBFloat16, kFloat16, kInt64, kUInt8}) {
    SCOPED_TRACE(dtype_name(t));
    EXPECT_EQ(nvrtc_errors(cuda::max_pool_kernel_source(t)), "");
  }
}

TEST(CudaRuntimeKernels, AvgPoolCompilesWithNvrtc) {
  for (DType t : {kFloat32, kFloat64, kBFloat16, kFloat16, kInt64}) {
    SCOPED_TRACE(dtype_name(t));
    EXPECT_EQ(nvrtc_errors(cuda::avg_pool_kernel_source(t)), "");
  }
}

// The launch's dividers (cuda::make_divider), used as the prelude's coil_udiv uses them, give
// n / d for every numerator below 2^63: divisors 1 to 5000, around every power of two and at
// random, numerators at the edges and at random.
TEST(CudaRuntimeKernels, DividersDivideExactly) {
  auto udiv = [](int64_t n, const cuda::Divider& v) {
    const auto u = static_cast<uint64_t>(n);
    const auto hi = static_cast<uint64_t>((static_cast<unsigned __int128>(u) * v.m) >> 64);
    return static_cast<int64_t>((hi + u) >> v.s);
  };
  constexpr int64_t kMax = INT64_MAX;
  std::vector<int64_t> divisors;
  for (int64_t d = 1; d <= 5000; ++d) divisors.push_back(d);
  for (int s = 1; s <= 62; ++s)
    for (int64_t d : {(int64_t{1} << s) - 1, int64_t{1} << s, (int64_t{1} << s) + 1})
      divisors.push_back(d);
  divisors.push_back(kMax);
  std::mt19937_64 rng(7);
  for (int k = 0; k < 2000; ++k) {
    const int bits = 1 + static_cast<int>(rng() % 62);
    divisors.push_back(1 + static_cast<int64_t>(rng() % (uint64_t{1} << bits)));
  }
  int64_t wrong = 0;
  for (int64_t d : divisors) {
    const cuda::Divider v = cuda::make_divider(d);
    std::vector<int64_t> ns = {0, 1, d - 1, d, kMax, kMax - 1, kMax / d * d, kMax / d * d - 1};
    if (d <= kMax / 2) ns.insert(ns.end(), {d + 1, 2 * d - 1, 2 * d});
    for (int k = 0; k < 50; ++k) {
      const int bits = 1 + static_cast<int>(rng() % 63);
      ns.push_back(static_cast<int64_t>(rng() % (uint64_t{1} << bits)));
    }
    for (int64_t n : ns)
      if (n >= 0 && udiv(n, v) != n / d && wrong++ < 5)
        ADD_FAILURE() << n << " / " << d << ": " << udiv(n, v);
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_THROW(cuda::make_divider(0), InternalError);
}
