#include <coil/coil.h>
#include <gtest/gtest.h>

using namespace coil;

TEST(Tensor, FactoriesAndMetadata) {
  Tensor z = zeros({2, 3});
  EXPECT_EQ(z.sizes(), (Shape{2, 3}));
  EXPECT_EQ(z.strides(), (Shape{3, 1}));
  EXPECT_EQ(z.dim(), 2);
  EXPECT_EQ(z.numel(), 6);
  EXPECT_EQ(z.dtype(), kFloat32);
  EXPECT_TRUE(z.is_contiguous());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(z.data_ptr()) % 64, 0u);
  EXPECT_EQ(full({2}, 7).dtype(), kInt64);
  EXPECT_EQ(full({2}, 7.5).dtype(), kFloat32);
  EXPECT_EQ(full({2}, true).dtype(), kBool);
  EXPECT_EQ(arange(5).sizes(), (Shape{5}));
  EXPECT_EQ(arange(0, 1, 0.25).numel(), 4);
  EXPECT_EQ(arange(0, 1, 0.25).dtype(), kFloat32);
}

TEST(Tensor, ItemRequiresOneElement) {
  EXPECT_THROW(arange(5).item(), Error);
  EXPECT_EQ(full({}, 3.5).item<double>(), 3.5);
}

TEST(Tensor, PrintLikePyTorch) {
  EXPECT_EQ(arange(3).str(), "tensor([0, 1, 2])");
  EXPECT_EQ(arange(0, 3, 1, kFloat32).str(), "tensor([0., 1., 2.])");
  EXPECT_EQ(full({2}, 0.5).str(), "tensor([0.5000, 0.5000])");
  EXPECT_EQ(arange(4).view({2, 2}).str(), "tensor([[0, 1],\n        [2, 3]])");
  EXPECT_EQ(full({}, 2.5, kFloat64).str(), "tensor(2.5000, dtype=coil.float64)");
  EXPECT_EQ((arange(3) > 0).str(), "tensor([False,  True,  True])");
}
