// Split reductions: a large reduction to one value, or to a few values (fewer than the machine's
// threads), runs as partials over pieces (one parallel kernel) and a small reduction of the
// partials; results match a float64 reference.
#include <gtest/gtest.h>

#include <coil/coil.h>
#include <coil/cuda.h>

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

// A full reduction over rows of a long last dim splits at those rows (16 to 8192 of them), so
// that its partials fuse into the kernel that makes the rows: a layer norm's output squared and
// summed (a loss) is one row kernel with the layer norm, then the rows' partials summed (pieces
// of 4096 elements, four rows each, made the statistics a kernel of their own). The result
// matches float64.
TEST(SplitReduction, FullReductionsOverLongRowsSplitAtTheRows) {
  auto loss = [](const Tensor& x) {
    Tensor y = layer_norm(x, {x.size(-1)});
    return sum(y * y * x);
  };
  for (const Device& device : {Device(kCPU), Device(kCUDA)}) {
    if (device.is_cuda() && !cuda::is_built()) continue;
    Graph g;
    Node* x = g.placeholder("x", ops::contiguous_meta(kFloat32, {1024, 1024}, device));
    Node* y = g.call(OpId::layer_norm, {x, Shape{1024}});
    g.output({g.call(OpId::sum, {g.call(OpId::mul, {g.call(OpId::mul, {y, y}), x})})});
    schedule::Schedule s = testing_stages::lowered_and_scheduled(g).schedule;
    ASSERT_EQ(s.kernels.size(), 2u) << device.str();
    EXPECT_EQ(sym_numel(s.kernels[0].outer), sym::constant(1024)) << device.str();
    EXPECT_EQ(s.kernels[0].inner, sym_constants({1024})) << device.str();
    EXPECT_EQ(s.kernels[1].inner, sym_constants({1024})) << device.str();
  }
  manual_seed(6);
  Tensor x = random({1024, 1024});
  const double want = loss(x.to(kFloat64)).item<double>();  // float32 sums: to 1e-5 or so
  EXPECT_NEAR(compile(loss)(x).item<double>(), want, 1e-4 * std::abs(want));
  // Rows too short (256) or too few (8) keep the pieces of several rows.
  for (Shape shape : {Shape{1024, 256}, Shape{8, 32768}}) {
    Graph g;
    Node* x = g.placeholder("x", ops::contiguous_meta(kFloat32, shape, kCPU));
    g.output({g.call(OpId::sum, {x})});
    schedule::Schedule s = testing_stages::lowered_and_scheduled(g).schedule;
    ASSERT_EQ(s.kernels.size(), 2u) << shape_str(shape);
    EXPECT_EQ(s.kernels[0].outer, sym_constants({256})) << shape_str(shape);
  }
}

// Few long rows (and few long columns): each value's elements in pieces, the partials laid out
// as [values, pieces]; many rows are not split.
// A split unravels each element's flat index over the reduction's dims; H and W of NCHW, which
// every read steps through as one, unravel as one dim: at sizes known only at run time, one
// division per element by H*W, not three (by H*W and twice by W).
TEST(SplitReduction, PiecesUnravelOverMergedDims) {
  const std::string ir =
      ir::to_string(testing_stages::lowered_and_scheduled(R"(# hints: s0=32 s1=4 s2=56
def forward(self, x: "f32[s0, s1, s2, s2][s1*s2*s2, s2*s2, s2, 1]cpu"):
    sum_1: "f32[s1][1]cpu" = coil.sum(x, [0, 2, 3])
    return (sum_1,)
)")
                        .program);
  EXPECT_NE(ir.find("// (s2*s2)"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("// s2)"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("% s2)"), std::string::npos) << ir;
  manual_seed(4);
  Tensor t = random({32, 4, 56, 56});
  auto f = [](const Tensor& a) { return sum(a, {0, 2, 3}); };
  const std::vector<double> want = values(f(t.to(kFloat64)));
  for (bool dynamic : {false, true}) {
    SCOPED_TRACE(dynamic ? "dynamic" : "static");
    expect_close(compile(f, {.dynamic = dynamic})(t), want, {4}, 1e-5, 1e-3);
  }
}

TEST(SplitReduction, FewLongRowsRunAsPartials) {
  Graph g;
  Node* x = g.placeholder("x", ops::contiguous_meta(kFloat32, {4, 65536}, kCPU));
  g.output({g.call(OpId::sum, {x, Shape{1}})});
  schedule::Schedule s = testing_stages::lowered_and_scheduled(g).schedule;
  ASSERT_EQ(s.kernels.size(), 2u);
  EXPECT_EQ(sym_numel(s.kernels[0].outer), sym::constant(4 * 128));  // pieces of 512
  EXPECT_EQ(s.kernels[0].inner, sym_constants({512}));
  EXPECT_EQ(s.kernels[1].outer, sym_constants({4}));
  EXPECT_EQ(s.kernels[1].inner, sym_constants({128}));
  Graph many;
  Node* y = many.placeholder("y", ops::contiguous_meta(kFloat32, {64, 65536}, kCPU));
  many.output({many.call(OpId::sum, {y, Shape{1}})});
  EXPECT_EQ(testing_stages::lowered_and_scheduled(many).schedule.kernels.size(), 1u);
}

// Columns too few for the CPU's threads (a batch norm's statistics over 64 channels of
// channels-last memory): their rows in pieces, each piece's partials a row of [pieces, 64], so
// that pieces and chunks of columns share the threads; a variance of that shape becomes two
// passes of sums, each split so. Columns enough for the threads are not split.
TEST(SplitReduction, FewColumnsOnTheCpuRunAsPartials) {
  Graph g;
  Node* x = g.placeholder("x", ops::contiguous_meta(kFloat32, {25088, 64}, kCPU));
  g.output({g.call(OpId::sum, {x, Shape{0}})});
  schedule::Schedule s = testing_stages::lowered_and_scheduled(g).schedule;
  ASSERT_EQ(s.kernels.size(), 2u);
  EXPECT_EQ(s.kernels[0].outer, sym_constants({32, 64}));  // 32 pieces of 784 rows
  EXPECT_EQ(s.kernels[0].inner, sym_constants({784}));
  EXPECT_EQ(s.kernels[1].inner, sym_constants({32}));

  Graph v;
  Node* y = v.placeholder("y", ops::contiguous_meta(kFloat32, {25088, 64}, kCPU));
  v.output({v.call(OpId::var, {y, Shape{0}, 1.0, false})});
  schedule::Schedule vs = testing_stages::lowered_and_scheduled(v).schedule;
  size_t partial_kernels = 0;
  for (const schedule::Kernel& k : vs.kernels) {
    for (const schedule::KernelNode& n : k.nodes) EXPECT_NE(n.reduce, ir::ReduceKind::WelfordM2);
    partial_kernels += k.outer == sym_constants({32, 64});
  }
  EXPECT_EQ(partial_kernels, 2u);  // the mean's sum and the squared deviations'

  Graph wide;
  Node* z = wide.placeholder("z", ops::contiguous_meta(kFloat32, {4096, 8192}, kCPU));
  wide.output({wide.call(OpId::sum, {z, Shape{0}})});
  EXPECT_EQ(testing_stages::lowered_and_scheduled(wide).schedule.kernels.size(), 1u);
}

TEST(SplitReduction, FewColumnsMatchFloat64) {
  manual_seed(7);
  Tensor x = random({8, 28, 28, 64}).permute({0, 3, 1, 2});  // channels-last [8, 64, 28, 28]
  auto f = compile([](const Tensor& a) {
    return std::make_tuple(sum(a, {0, 2, 3}), var(a, {0, 2, 3}, 0.0), amax(a, {0, 2, 3}, true));
  });
  auto [sums, vars, maxes] = f(x);
  Tensor x64 = x.to(kFloat64);
  expect_close(sums, values(sum(x64, {0, 2, 3})), {64}, 1e-5, 1e-3);
  expect_close(vars, values(var(x64, {0, 2, 3}, 0.0)), {64}, 1e-5, 1e-6);
  expect_close(maxes, values(amax(x64, {0, 2, 3}, true)), {1, 64, 1, 1}, 0, 0);
}

TEST(SplitReduction, FewLongRowsMatchFloat64) {
  manual_seed(6);
  Tensor x = random({3, 40000}), c = random({50000, 2});
  auto f = compile([](const Tensor& a, const Tensor& b) {
    return std::make_tuple(sum(a, {1}), amax(a, {1}, true), sum(b, {0}), softmax(a, 1),
                           mean(a.reshape({3, 200, 200}), {1, 2}));
  });
  auto [rows, maxes, cols, soft, means] = f(x, c);
  Tensor x64 = x.to(kFloat64), c64 = c.to(kFloat64);
  expect_close(rows, values(sum(x64, {1})), {3}, 1e-5, 1e-3);
  expect_close(maxes, values(amax(x64, {1}, true)), {3, 1}, 0, 0);
  expect_close(cols, values(sum(c64, {0})), {2}, 1e-5, 1e-3);
  expect_close(soft, values(softmax(x64, 1)), {3, 40000}, 1e-5, 1e-9);
  expect_close(means, values(mean(x64.reshape({3, 200, 200}), {1, 2})), {3}, 1e-5, 1e-6);
}

}  // namespace
}  // namespace coil::testing
