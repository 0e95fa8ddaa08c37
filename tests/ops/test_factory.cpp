// Factories, random numbers, from_blob and the dtype/device basics.
#include <cmath>

#include "runtime/random.h"
#include "testing.h"

using namespace coil;
using namespace coil::testing;

TEST(Factory, FullZerosOnesEye) {
  expect_close(full({2, 2}, 3.5), {3.5, 3.5, 3.5, 3.5}, {2, 2});
  expect_close(zeros({3}, kInt8), {0, 0, 0}, {3}, 0, 0);
  expect_close(ones({2}, kBFloat16), {1, 1}, {2}, 0, 0);
  expect_close(eye(2, 3), {1, 0, 0, 0, 1, 0}, {2, 3}, 0, 0);
  expect_close(eye(2), {1, 0, 0, 1}, {2, 2}, 0, 0);
  EXPECT_EQ(zeros({0, 4}).numel(), 0);
  EXPECT_EQ(full({}, 2).dim(), 0);
  EXPECT_COIL_ERROR(full({2, -1}, 0), "negative dimension");
  EXPECT_COIL_ERROR(eye(-1), "non-negative");
  EXPECT_COIL_ERROR(empty({-2}), "negative");
}

TEST(Factory, ArangeAndLinspace) {
  expect_close(arange(5), {0, 1, 2, 3, 4}, {5}, 0, 0);
  expect_close(arange(2, 11, 3), {2, 5, 8}, {3}, 0, 0);
  expect_close(arange(5, 0, -2), {5, 3, 1}, {3}, 0, 0);
  expect_close(arange(0, 1, 0.3), {0, 0.3, 0.6, 0.9}, {4});
  expect_close(arange(0, 4, 1, kFloat64), {0, 1, 2, 3}, {4}, 0, 0);
  EXPECT_EQ(arange(0, 0).numel(), 0);
  EXPECT_COIL_ERROR(arange(0, 5, 0), "step must be nonzero");
  EXPECT_COIL_ERROR(arange(5, 0, 1), "not reachable");
  expect_close(linspace(0, 1, 5), {0, 0.25, 0.5, 0.75, 1}, {5});
  expect_close(linspace(-1, 1, 1), {-1}, {1});
  EXPECT_EQ(linspace(0, 1, 0).numel(), 0);
  EXPECT_EQ(linspace(3, 7, 101).to_vector_double().back(), 7.0);
}

TEST(Factory, RandomIsSeededAndInRange) {
  manual_seed(42);
  Tensor a = rand({1000});
  manual_seed(42);
  Tensor b = rand({1000});
  EXPECT_TRUE(equal(a, b));
  Tensor c = rand({1000});
  EXPECT_FALSE(equal(a, c));
  double mean = 0;
  for (double v : values(a)) {
    EXPECT_GE(v, 0.0);
    EXPECT_LT(v, 1.0);
    mean += v / 1000;
  }
  EXPECT_NEAR(mean, 0.5, 0.05);

  Tensor n = randn({20000}, kFloat64);
  double m = 0, m2 = 0;
  for (double v : values(n)) m += v / 20000;
  for (double v : values(n)) m2 += (v - m) * (v - m) / 20000;
  EXPECT_NEAR(m, 0, 0.03);
  EXPECT_NEAR(m2, 1, 0.05);

  Tensor r = randint(-3, 4, {2000});
  EXPECT_EQ(r.dtype(), kInt64);
  std::vector<int> hist(7);
  for (double v : values(r)) {
    ASSERT_GE(v, -3);
    ASSERT_LT(v, 4);
    hist[static_cast<size_t>(v + 3)]++;
  }
  for (int h : hist) EXPECT_GT(h, 200);
  EXPECT_COIL_ERROR(randint(3, 3, {2}), "greater than low");
  EXPECT_COIL_ERROR(rand({2}, kInt64), "floating-point");
  EXPECT_EQ(randn_like(ones({2, 3}, kFloat16)).dtype(), kFloat16);
}

// The generator is Philox-4x32-10 (Random123's known answer for a zero counter and key), and
// counter-based: a fill takes the next counters, so two fills draw what one fill of both sizes
// draws, on the serial and the parallel path alike.
TEST(Factory, RandomDrawsAreCounterBased) {
  EXPECT_EQ(philox(0, 0),
            (std::array<uint32_t, 4>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_NE(philox(1, 0), philox(0, 0));
  EXPECT_NE(philox(0, 1), philox(0, 0));
  for (int64_t n : {10, 40000}) {
    SCOPED_TRACE(n);
    manual_seed(7);
    Tensor a = rand({n}, kFloat64), b = randn({3, 5}, kFloat64), c = randint(0, 1000, {n});
    manual_seed(7);
    Tensor all = rand({2 * n + 15}, kFloat64);
    EXPECT_TRUE(equal(a, all.narrow(0, 0, n)));
    manual_seed(7);
    Tensor skip = rand({n}, kFloat64);
    EXPECT_TRUE(equal(randn({15}, kFloat64).reshape({3, 5}), b));
    EXPECT_TRUE(equal(randint(0, 1000, {n}), c));
    EXPECT_TRUE(equal(skip, a));
  }
  // Element i of a fill is draw(i): float32 is float64's draw rounded.
  manual_seed(3);
  Tensor f = rand({100});
  manual_seed(3);
  EXPECT_TRUE(equal(f, rand({100}, kFloat64).to(kFloat32)));
}

TEST(Factory, FromBlobSharesMemory) {
  float data[6] = {1, 2, 3, 4, 5, 6};
  Tensor t = from_blob(data, {2, 3});
  EXPECT_EQ(t.data_ptr<float>(), data);
  t.mul_(2);
  EXPECT_EQ(data[5], 12);
  Tensor col = from_blob(data, {2}, {3}, kFloat32);
  expect_close(col, {2, 8}, {2});
  EXPECT_COIL_ERROR(t.data_ptr<double>(), "float64 was requested");
}

TEST(Factory, TensorFromVector) {
  Tensor t = tensor(std::vector<double>{1, 2, 3, 4}, Shape{2, 2});
  EXPECT_EQ(t.dtype(), kFloat64);
  EXPECT_EQ(t.sizes(), (Shape{2, 2}));
  EXPECT_EQ(tensor(std::vector<int32_t>{1}).dtype(), kInt32);
  EXPECT_EQ(tensor(std::vector<bool>{true, false}).dtype(), kBool);
  EXPECT_COIL_ERROR(tensor(std::vector<float>{1, 2, 3}, Shape{2, 2}), "do not fill");
}

TEST(DTypes, NamesSizesPromotion) {
  EXPECT_EQ(itemsize(kBFloat16), 2u);
  EXPECT_EQ(itemsize(kInt64), 8u);
  EXPECT_STREQ(dtype_name(kFloat16), "float16");
  EXPECT_STREQ(dtype_short_name(kBFloat16), "bf16");
  EXPECT_EQ(dtype_from_name("f32"), kFloat32);
  EXPECT_EQ(dtype_from_name("int64"), kInt64);
  EXPECT_COIL_ERROR(dtype_from_name("float128"), "unknown dtype");
  EXPECT_EQ(promote_types(kBool, kInt8), kInt8);
  EXPECT_EQ(promote_types(kInt64, kFloat16), kFloat16);
  EXPECT_EQ(promote_types(kFloat32, kFloat64), kFloat64);
  EXPECT_EQ(promote_types(kUInt8, kInt32), kInt32);
  // Promotion is symmetric.
  for (int i = 0; i < kNumDTypes; ++i)
    for (int j = 0; j < kNumDTypes; ++j)
      EXPECT_EQ(promote_types(DType(i), DType(j)), promote_types(DType(j), DType(i)));
}

TEST(Devices, ParseAndPrint) {
  EXPECT_EQ(Device("cuda:1").index, 1);
  EXPECT_TRUE(Device("cuda").is_cuda());
  EXPECT_EQ(Device("cpu").str(), "cpu");
  EXPECT_EQ(Device("cuda:2").str(), "cuda:2");
  EXPECT_COIL_ERROR(Device("tpu"), "unknown device");
  EXPECT_COIL_ERROR(Device("cuda:x"), "bad device index");
}
