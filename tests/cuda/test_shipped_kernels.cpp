// The GPU kernels coil ships compiled (jit/seed_cache.h): the build's seed cache holds every one
// for sm_90 with this toolkit (checked without a GPU: nothing is left to compile into it), and
// on a GPU a program with an empty code cache loads them without a compile and gets the CPU's
// results from them.
#include <coil/coil.h>
#include <coil/cuda.h>

#include <cstdlib>

#include "backends/cuda/cuda_compiler.h"
#include "backends/cuda/driver.h"
#include "backends/cuda/flash_attention.h"
#include "cuda_testing.h"
#include "jit/jit_testing.h"
#include "jit/seed_cache.h"

using namespace coil;
using namespace coil::testing;

namespace {

class ShippedKernels : public JitTest {
 protected:
  void SetUp() override {
    JitTest::SetUp();
    unsetenv("COIL_SEED_DIR");  // the build's seed, beside libcoil
    if (jit::seed_root().empty()) GTEST_SKIP() << "no seed cache: built with COIL_SEED_KERNELS=OFF";
  }
};

}  // namespace

TEST_F(ShippedKernels, TheBuildsSeedHoldsEveryOne) {
  if (std::getenv("COIL_CUDA_ARCH")) GTEST_SKIP() << "COIL_CUDA_ARCH asks for another architecture";
  setenv("COIL_CACHE_DIR", jit::seed_root().c_str(), 1);
  std::vector<std::string> missing;
  EXPECT_EQ(backends::cuda_backend(-1)->precompile_library_kernels(&missing), 0)
      << "compiled into the seed now: " << ::testing::PrintToString(missing);
  EXPECT_EQ(jit::stats().compiles, 0);
}

TEST_F(ShippedKernels, AnEmptyCacheLoadsThemWithoutACompile) {
  COIL_REQUIRE_GPU();
  if (cuda::NvrtcCompiler(0).arch() != "sm_90") GTEST_SKIP() << "the seed is for sm_90";
  jit::LoadInfo info;
  auto module = jit::load(cuda::attention_kernel_source(kBFloat16, 128, 128),
                          cuda::NvrtcCompiler(0), "attention_bf16_128", &info);
  EXPECT_EQ(info.outcome, jit::CacheOutcome::seed_hit);
  EXPECT_NE(static_cast<const cuda::CudaModule&>(*module).function("coil_attention"), nullptr);
  EXPECT_EQ(jit::stats().compiles, 0);

  // Attention of heads of 64 in float32 from the shipped kernel, against the CPU.
  Tensor q = random({2, 4, 100, 64}), k = random({2, 4, 80, 64}), v = random({2, 4, 80, 64});
  expect_same(scaled_dot_product_attention(q.cuda(), k.cuda(), v.cuda()),
              scaled_dot_product_attention(q, k, v), "attention", 1e-4, 1e-5);
  EXPECT_EQ(jit::stats().compiles, 0);
}
