// The layouts of a compiled graph's results and inputs. Results that are views of one computed
// value (q, k and v split from one projection) come back as eager lays them out, views of the
// value written once; a backward graph compiled for those strides reads them so. An input laid
// out otherwise than its graph says (which guards rule out for a user's inputs, but not for a
// backward's saved tensors) is copied into the planned layout, not read past its end.
#include <gtest/gtest.h>

#include <coil/coil.h>

#include "compile/compile_fx.h"
#include "graph/parser.h"
#include "testing.h"

namespace coil::testing {
namespace {

TEST(OutputLayouts, ViewsOfOneValueKeepEagersStridesAndShareIt) {
  manual_seed(1);
  Tensor x = random({2, 5, 12}), b = random({12});
  auto f = [](const Tensor& x, const Tensor& b) {
    std::vector<Tensor> parts = split(x + b, 4, 2);
    return std::vector<Tensor>{parts[0], parts[1].transpose(0, 1), parts[2]};
  };
  const std::vector<Tensor> want = f(x, b);
  const std::vector<Tensor> got = compile(f)(x, b);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[i].sizes(), want[i].sizes());
    EXPECT_EQ(got[i].strides(), want[i].strides());
    expect_close(got[i], values(want[i]), want[i].sizes(), 1e-6, 1e-6);
  }
  // One buffer: the parts 4 elements apart.
  const auto* first = static_cast<const char*>(got[0].data_ptr());
  EXPECT_EQ(static_cast<const char*>(got[1].data_ptr()) - first, 4 * 4);
  EXPECT_EQ(static_cast<const char*>(got[2].data_ptr()) - first, 8 * 4);
}

TEST(OutputLayouts, ASmallViewOfALargeValueIsWrittenAlone) {
  Tensor x = random({64, 64});
  auto f = [](const Tensor& x) { return x.exp().narrow(1, 0, 2); };
  const Tensor want = f(x);
  const Tensor got = compile(f)(x);
  EXPECT_TRUE(got.is_contiguous());
  expect_close(got, values(want), want.sizes(), 1e-6, 1e-6);
}

TEST(OutputLayouts, AnInputLaidOutOtherwiseIsCopiedIntoThePlannedLayout) {
  // The graph reads x as a transposed [6, 4] (strides [1, 6]); it is handed a contiguous one.
  std::shared_ptr<const Graph> g = std::make_shared<Graph>(parse_graph(R"(
def forward(self, x: "f32[6, 4][1, 6]cpu"):
    y: "f32[6, 4][4, 1]cpu" = coil.mul(x, 2.0)
    return (y,)
)"));
  capture::CompiledGraph cg = compile_fx(g, CompileOptions{}, "output_layouts");
  Tensor x = random({6, 4});
  const std::vector<Tensor> got = cg.run({x});
  ASSERT_EQ(got.size(), 1u);
  expect_close(got[0], values(x * 2), {6, 4}, 1e-6, 1e-6);
  // And laid out as planned, read in place.
  Tensor t = random({4, 6}).transpose(0, 1);
  expect_close(cg.run({t})[0], values(t * 2), {6, 4}, 1e-6, 1e-6);
}

}  // namespace
}  // namespace coil::testing
