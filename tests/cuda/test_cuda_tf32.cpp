// TF32 (coil/cuda.h): PyTorch's defaults (products off, convolutions on), switched as
// torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 and
// torch.set_float32_matmul_precision("high"). On the GPU a float32 product with TF32 allowed
// must lose precision (the inputs are rounded to 10 mantissa bits) and one without must not:
// measured against a float64 product of the same inputs. The rest of the suite checks float32
// convolutions at full precision: this file's environment turns their TF32 off for it, as
// PyTorch's tests do.
#include <gtest/gtest.h>

#include <coil/coil.h>
#include <coil/cuda.h>

#include "cuda_testing.h"

using namespace coil;

namespace {

// Largest |a - b| over the elements, with b the float64 reference.
double max_error(const Tensor& a, const Tensor& b) {
  return amax(abs(sub(a.cpu().to(kFloat64), b))).item<double>();
}

// The switches as a process starts, before the environment below changes them.
const bool kDefaultMatmul = cuda::matmul_allow_tf32(), kDefaultCudnn = cuda::cudnn_allow_tf32();

struct FullPrecisionConvolutions : ::testing::Environment {
  void SetUp() override { cuda::set_cudnn_allow_tf32(false); }
};
[[maybe_unused]] ::testing::Environment* const kFullPrecision =
    ::testing::AddGlobalTestEnvironment(new FullPrecisionConvolutions);

// Restores the suite's switches whatever the test did.
struct Tf32Reset {
  ~Tf32Reset() {
    cuda::set_matmul_allow_tf32(false);
    cuda::set_cudnn_allow_tf32(false);
  }
};

}  // namespace

TEST(Tf32, PyTorchsDefaultsAndSetByPrecision) {
  Tf32Reset reset;
  EXPECT_FALSE(kDefaultMatmul);
  EXPECT_TRUE(kDefaultCudnn);
  EXPECT_FALSE(cuda::matmul_allow_tf32());
  EXPECT_FALSE(cuda::cudnn_allow_tf32());  // the environment's
  EXPECT_EQ(get_float32_matmul_precision(), "highest");
  set_float32_matmul_precision("high");
  EXPECT_TRUE(cuda::matmul_allow_tf32());
  EXPECT_FALSE(cuda::cudnn_allow_tf32());
  EXPECT_EQ(get_float32_matmul_precision(), "high");
  set_float32_matmul_precision("highest");
  EXPECT_FALSE(cuda::matmul_allow_tf32());
  try {
    set_float32_matmul_precision("fast");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"fast\" is not a precision"), std::string::npos)
        << e.what();
  }
}

TEST(Tf32, ProductsOnTheGpuRoundOnlyWhenAllowed) {
  COIL_REQUIRE_GPU();
  Tf32Reset reset;
  manual_seed(7);
  Tensor a = randn({128, 2048}), b = randn({2048, 128});
  Tensor want = matmul(a.to(kFloat64), b.to(kFloat64));
  Tensor ga = a.cuda(), gb = b.cuda();
  auto product = [&](const Tensor& x, const Tensor& y) { return matmul(x, y); };
  auto compiled = coil::compile(product);
  const double full = max_error(matmul(ga, gb), want);
  const double full_compiled = max_error(compiled(ga, gb), want);
  cuda::set_matmul_allow_tf32(true);
  const double tf32 = max_error(matmul(ga, gb), want);
  const double tf32_compiled = max_error(compiled(ga, gb), want);
  // Entries are sums of 2048 products of unit normals (|value| ~ 45): float32 keeps ~1e-4 of
  // them, TF32's rounded inputs lose ~100 times more.
  EXPECT_LT(full, 2e-3);
  EXPECT_LT(full_compiled, 2e-3);
  EXPECT_GT(tf32, 10 * full) << "TF32 was allowed but the product kept full precision";
  EXPECT_GT(tf32_compiled, 10 * full_compiled);
  EXPECT_LT(tf32, 0.5);
  cuda::set_matmul_allow_tf32(false);
  EXPECT_LT(max_error(matmul(ga, gb), want), 2e-3) << "switching TF32 off again did not";
}

TEST(Tf32, ConvolutionsStayCloseWithTf32Allowed) {
  COIL_REQUIRE_GPU();
  Tf32Reset reset;
  manual_seed(8);
  Tensor x = randn({2, 64, 16, 16}), w = randn({64, 64, 3, 3});
  Tensor want = conv2d(x.to(kFloat64), w.to(kFloat64), {}, {1, 1}, {1, 1});
  const double full = max_error(conv2d(x.cuda(), w.cuda(), {}, {1, 1}, {1, 1}), want);
  cuda::set_cudnn_allow_tf32(true);
  const double tf32 = max_error(conv2d(x.cuda(), w.cuda(), {}, {1, 1}, {1, 1}), want);
  EXPECT_LT(full, 2e-3);
  // cuDNN may or may not pick a tensor-core algorithm; either way the result stays within
  // TF32's rounding of sums of 576 products.
  EXPECT_LT(tf32, 0.5);
}
