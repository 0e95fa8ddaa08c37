// Split reductions: a large reduction to one value runs as partials over pieces (one parallel
// kernel) and a small reduction of the partials; results match a float64 reference.
#include <gtest/gtest.h>

#include <coil/coil.h>

#include "testing_stages.h"
#include "ops/meta_util.h"
#include "testing.h"

namespace coil::testing {
namespace {

TEST(SplitReduction, LargeFullReductionsRunAsPartials) {
  Graph g;
  Node* x = g.placeholder("x", ops::contiguous_meta(kFloat32, {512, 256}, kCPU));
  Node* sq = g.call(OpId::mul, {x, x});
  g.output({g.call(OpId::sum, {sq}), g.call(OpId::amax, {x})});
  schedule::Schedule s = testing_stages::lowered_and_scheduled(g).schedule;
  ASSERT_EQ(s.kernels.size(), 2u);
  EXPECT_EQ(s.kernels[0].outer, sym_constants({256}));  // the partials: one per piece
  EXPECT_EQ(s.kernels[0].inner, sym_constants({512}));
  EXPECT_EQ(s.kernels[1].inner, sym_constants({256}));  // the partials reduced
}

TEST(SplitReduction, SmallOrIndivisibleReductionsAreNotSplit) {
  for (Shape shape : {Shape{64, 64}, Shape{40009}}) {  // too small; a prime length
    Graph g;
    Node* x = g.placeholder("x", ops::contiguous_meta(kFloat32, shape, kCPU));
    g.output({g.call(OpId::sum, {x})});
    schedule::Schedule s = testing_stages::lowered_and_scheduled(g).schedule;
    EXPECT_EQ(s.kernels.size(), 1u) << shape_str(shape);
  }
}

TEST(SplitReduction, MatchesFloat64) {
  manual_seed(5);
  Tensor x = random({512, 256}), b = random({1 << 16}) > 0.9;
  auto f = compile([](const Tensor& a, const Tensor& m) {
    return std::make_tuple(mean(a * a), amax(a), amin(a.t()), any(m), all(m), prod(a * 0 + 1.0001));
  });
  auto [mean_sq, mx, mn, anyv, allv, pr] = f(x, b);
  Tensor x64 = x.to(kFloat64);
  EXPECT_NEAR(mean_sq.item<double>(), mean(x64 * x64).item<double>(), 1e-6);
  EXPECT_EQ(mx.item<double>(), amax(x64).item<double>());
  EXPECT_EQ(mn.item<double>(), amin(x64).item<double>());
  EXPECT_TRUE(anyv.item<bool>());
  EXPECT_FALSE(allv.item<bool>());
  EXPECT_NEAR(pr.item<double>(), std::pow(1.0001f, 131072), 1e-2 * std::pow(1.0001, 131072));
}

}  // namespace
}  // namespace coil::testing
