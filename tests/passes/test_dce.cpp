// Dead code elimination: unused calls, getitems, constants and parameters go, cascading back
// through their inputs; placeholders and side effects stay.
#include "pass_testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

TEST(Dce, RemovesUnusedNodesTransitively) {
  expect_pass(run_dce,
              "def forward(self, x: \"f32[4, 6][6, 1]cpu\", y: \"f32[6][1]cpu\"):\n"
              "    c: \"f32[2][1]cpu\" = coil.constant([1.0, 2.0])\n"
              "    a = coil.sin(x)\n"
              "    b = coil.exp(a)\n"
              "    sp = coil.split(x, 2)\n"
              "    g0 = sp[0]\n"
              "    d = coil.cos(x)\n"
              "    return (d,)\n",
              "def forward(self, x: \"f32[4, 6][6, 1]cpu\", y: \"f32[6][1]cpu\"):\n"
              "    d = coil.cos(x)\n"
              "    return (d,)\n");
}

TEST(Dce, RemovesUnusedParameters) {
  const char* text =
      "def forward(self, x: \"f32[3][1]cpu\"):\n"
      "    w: \"f32[3][1]cpu\" = coil.parameter(\"fc.weight\")\n"
      "    m = coil.mul(w, 2)\n"
      "    return (x,)\n";
  Graph g = parse_graph(text);
  EXPECT_TRUE(run_dce(g));
  EXPECT_EQ(print_graph(g), "def forward(self, x: \"f32[3][1]cpu\"):\n    return (x,)\n");
}

TEST(Dce, KeepsUnusedPlaceholdersAndUsedGetitems) {
  expect_no_change(run_dce,
                   "def forward(self, x: \"f32[4, 6][6, 1]cpu\", unused: \"f32[2][1]cpu\"):\n"
                   "    sp = coil.split(x, 2)\n"
                   "    g1 = sp[1]\n"
                   "    return (g1,)\n");
}

// batch_norm in training updates its running statistics: that must happen even when the
// normalised output is not used.
TEST(Dce, KeepsCallsWithSideEffects) {
  expect_no_change(
      run_dce,
      "def forward(self, x: \"f32[2, 3, 4, 4][48, 16, 4, 1]cpu\", rm: \"f32[3][1]cpu\", "
      "rv: \"f32[3][1]cpu\"):\n"
      "    bn = coil.batch_norm(x, None, None, rm, rv, True)\n"
      "    return (x,)\n");
  expect_pass(run_dce,
              "def forward(self, x: \"f32[2, 3, 4, 4][48, 16, 4, 1]cpu\", rm: \"f32[3][1]cpu\", "
              "rv: \"f32[3][1]cpu\"):\n"
              "    bn = coil.batch_norm(x, None, None, rm, rv, False)\n"
              "    return (x,)\n",
              "def forward(self, x: \"f32[2, 3, 4, 4][48, 16, 4, 1]cpu\", rm: \"f32[3][1]cpu\", "
              "rv: \"f32[3][1]cpu\"):\n"
              "    return (x,)\n");
}

TEST(Dce, LeavesAGraphWithoutOutputAlone) {
  Graph g;
  Node* x = g.placeholder("x", TensorMeta{kFloat32, {2}, {1}, 0, kCPU});
  g.call(OpId::sin, {x});
  EXPECT_FALSE(run_dce(g));
  EXPECT_EQ(g.size(), 2u);
}

}  // namespace
