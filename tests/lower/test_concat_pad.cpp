// cat and constant pad compile to generated kernels (no extern call) and match eager, along
// every dim, with mixed dtypes, empty inputs, crops and fill values.
#include <gtest/gtest.h>

#include <coil/coil.h>

#include "testing.h"

namespace coil::testing {
namespace {

template <typename F, typename... Args>
void expect_compiled_like_eager(F f, const Args&... args) {
  compiler_reset();
  Tensor got = compile(f)(args...);
  Tensor want = f(args...);
  EXPECT_EQ(got.sizes(), want.sizes());
  EXPECT_EQ(got.dtype(), want.dtype());
  EXPECT_TRUE(allclose(got.to(kFloat64), want.to(kFloat64), 1e-6, 1e-6));
  EXPECT_EQ(counters()["extern_calls"], 0);
}

TEST(ConcatPad, CatAlongEveryDim) {
  manual_seed(2);
  Tensor a = random({3, 5, 7}), b = random({3, 2, 7}), c = random({3, 4, 7});
  expect_compiled_like_eager(
      [](const Tensor& x, const Tensor& y, const Tensor& z) {
        return cat({x, y, z}, 1) * 2;
      },
      a, b, c);
  Tensor d = random({3, 5, 1}), e = random({3, 5, 9});
  expect_compiled_like_eager(
      [](const Tensor& x, const Tensor& y, const Tensor& z) {
        return cat({x, y, z}, -1).exp();
      },
      a, d, e);
  expect_compiled_like_eager([](const Tensor& x) { return cat({x, x.sin()}, 0); }, a);
}

TEST(ConcatPad, CatPromotesAndSkipsEmptyInputs) {
  Tensor f = random({4, 3}), i = randint(0, 9, {2, 3}), empty = zeros({0});
  expect_compiled_like_eager(
      [](const Tensor& x, const Tensor& y, const Tensor& z) {
        return cat({x, z, y}, 0);
      },
      f, i, empty);
}

TEST(ConcatPad, ConstantPadGrowsAndCrops) {
  Tensor x = random({4, 6, 5});
  expect_compiled_like_eager([](const Tensor& t) { return pad(t, {1, 2}); }, x);
  expect_compiled_like_eager(
      [](const Tensor& t) {
        return pad(t, {-1, 2, 3, -2}, "constant", 1.5);
      },
      x);
  expect_compiled_like_eager([](const Tensor& t) { return pad(t.relu(), {0, 0, 0, 0, 2, 1}); }, x);
}

TEST(ConcatPad, OtherPadModesRunEagerly) {
  Tensor x = random({2, 3, 5});
  compiler_reset();
  auto f = [](const Tensor& t) { return pad(t, {2, 2}, "reflect"); };
  Tensor got = compile(f)(x);
  EXPECT_TRUE(allclose(got, f(x)));
  EXPECT_EQ(counters()["extern_calls"], 1);
}

}  // namespace
}  // namespace coil::testing
