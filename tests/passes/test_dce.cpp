// Dead code elimination: unused calls, getitems, constants and parameters go, cascading back
// through their inputs; placeholders and side effects stay.
#include "pass_testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

TEST(Dce, RemovesUnusedNodesTransitively) {
  expect_pass(run_dce,
              R"(def forward(self, x: "f32[4, 6][6, 1]cpu", y: "f32[6][1]cpu"):
    c: "f32[2][1]cpu" = coil.constant([1.0, 2.0])
    a = coil.sin(x)
    b = coil.exp(a)
    sp = coil.split(x, 2)
    g0 = sp[0]
    d = coil.cos(x)
    return (d,)
)",
              R"(def forward(self, x: "f32[4, 6][6, 1]cpu", y: "f32[6][1]cpu"):
    d = coil.cos(x)
    return (d,)
)");
}

TEST(Dce, RemovesUnusedParameters) {
  const char* text =
      R"(def forward(self, x: "f32[3][1]cpu"):
    w: "f32[3][1]cpu" = coil.parameter("fc.weight")
    m = coil.mul(w, 2)
    return (x,)
)";
  Graph g = parse_graph(text);
  EXPECT_TRUE(run_dce(g));
  EXPECT_EQ(print_graph(g), R"(def forward(self, x: "f32[3][1]cpu"):
    return (x,)
)");
}

TEST(Dce, KeepsUnusedPlaceholdersAndUsedGetitems) {
  expect_no_change(run_dce,
                   R"(def forward(self, x: "f32[4, 6][6, 1]cpu", unused: "f32[2][1]cpu"):
    sp = coil.split(x, 2)
    g1 = sp[1]
    return (g1,)
)");
}

// batch_norm in training updates its running statistics: that must happen even when the
// normalised output is not used.
TEST(Dce, KeepsCallsWithSideEffects) {
  expect_no_change(
      run_dce,
      R"(def forward(self, x: "f32[2, 3, 4, 4][48, 16, 4, 1]cpu", rm: "f32[3][1]cpu", rv: "f32[3][1]cpu"):
    bn = coil.batch_norm(x, None, None, rm, rv, True)
    return (x,)
)");
  expect_pass(
      run_dce,
      R"(def forward(self, x: "f32[2, 3, 4, 4][48, 16, 4, 1]cpu", rm: "f32[3][1]cpu", rv: "f32[3][1]cpu"):
    bn = coil.batch_norm(x, None, None, rm, rv, False)
    return (x,)
)",
      R"(def forward(self, x: "f32[2, 3, 4, 4][48, 16, 4, 1]cpu", rm: "f32[3][1]cpu", rv: "f32[3][1]cpu"):
    return (x,)
)");
}

TEST(Dce, LeavesAGraphWithoutOutputAlone) {
  Graph g;
  Node* x = g.placeholder("x", TensorMeta{kFloat32, {2}, {1}, 0, kCPU});
  g.call(OpId::sin, {x});
  EXPECT_FALSE(run_dce(g));
  EXPECT_EQ(g.size(), 2u);
}

}  // namespace
