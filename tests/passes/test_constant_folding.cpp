// Constant folding: calls on constants become constants, except random calls, factories,
// large results, results the graph returns, and calls whose kernel fails.
#include "pass_testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

const char* kHead = "def forward(self, x: \"f32[2][1]cpu\"):\n";

TEST(ConstantFolding, FoldsChainsOfCallsOnConstants) {
  expect_pass(run_constant_folding,
              std::string(kHead) +
                  "    c: \"f32[2][1]cpu\" = coil.constant([1.0, 4.0])\n"
                  "    d: \"f32[2][1]cpu\" = coil.constant([0.5, 0.25])\n"
                  "    s = coil.sqrt(c)\n"
                  "    m = coil.mul(s, d)\n"
                  "    a = coil.add(x, m)\n"
                  "    return (a,)\n",
              std::string(kHead) +
                  "    constant_1: \"f32[2][1]cpu\" = coil.constant([0.5, 0.5])\n"
                  "    a = coil.add(x, constant_1)\n"
                  "    return (a,)\n");
}

TEST(ConstantFolding, FoldsViewsAndMultiOutputCalls) {
  expect_pass(run_constant_folding,
              std::string(kHead) +
                  "    c: \"i64[2, 2][2, 1]cpu\" = coil.constant([1, 2, 3, 4])\n"
                  "    t = coil.t(c)\n"
                  "    sp = coil.split(t, 1)\n"
                  "    g0 = sp[0]\n"
                  "    g1 = sp[1]\n"
                  "    v0 = coil.view(g0, [2])\n"
                  "    v1 = coil.view(g1, [2])\n"
                  "    a = coil.mul(x, v0)\n"
                  "    b = coil.sub(a, v1)\n"
                  "    return (b,)\n",
              std::string(kHead) +
                  "    constant_3: \"i64[2][1]cpu\" = coil.constant([1, 3])\n"
                  "    constant_4: \"i64[2][1]cpu\" = coil.constant([2, 4])\n"
                  "    a = coil.mul(x, constant_3)\n"
                  "    b = coil.sub(a, constant_4)\n"
                  "    return (b,)\n");
}

TEST(ConstantFolding, LeavesFactoriesAndRandomCalls) {
  expect_no_change(run_constant_folding, std::string(kHead) +
                                             "    f = coil.full([2], 3.0)\n"
                                             "    r = coil.arange(0, 2)\n"
                                             "    c: \"f32[2][1]cpu\" = coil.constant([1.0, 4.0])\n"
                                             "    d = coil.dropout(c, 0.5, True)\n"
                                             "    a = coil.add(x, f)\n"
                                             "    b = coil.add(a, r)\n"
                                             "    e = coil.add(b, d)\n"
                                             "    return (e,)\n");
}

TEST(ConstantFolding, LeavesCallsOnParametersAndInputs) {
  Graph g = parse_graph(std::string(kHead) +
                            "    w: \"f32[2][1]cpu\" = coil.parameter(\"w\")\n"
                            "    c: \"f32[2][1]cpu\" = coil.constant([1.0, 4.0])\n"
                            "    a = coil.add(w, c)\n"
                            "    b = coil.add(x, c)\n"
                            "    m = coil.mul(a, b)\n"
                            "    return (m,)\n",
                        {{"w", ones({2})}});
  EXPECT_FALSE(run_constant_folding(g));
}

// 64K elements fold; one more does not (the graph would carry 256 KiB of float32).
TEST(ConstantFolding, LeavesLargeResults) {
  auto graph_of = [](int64_t n) {
    Graph g;
    Node* x = g.placeholder("x", TensorMeta{kFloat32, {n}, {1}, 0, kCPU});
    Node* c = g.constant(full({1}, 2.0));
    Node* e = g.call(OpId::expand, {c, Shape{n}});
    Node* s = g.call(OpId::sin, {e});
    g.output({g.call(OpId::add, {x, s})});
    return g;
  };
  Graph small = graph_of(65536), large = graph_of(65537);
  EXPECT_TRUE(run_constant_folding(small));
  EXPECT_FALSE(run_constant_folding(large));
}

// The graph's results stay computed per call: a constant result would hand every caller the
// graph's own tensor.
TEST(ConstantFolding, LeavesResultsAndTheirViews) {
  expect_pass(run_constant_folding,
              std::string(kHead) +
                  "    c: \"f32[2][1]cpu\" = coil.constant([1.0, 4.0])\n"
                  "    s = coil.sqrt(c)\n"
                  "    m = coil.mul(s, 3)\n"
                  "    v = coil.view(m, [1, 2])\n"
                  "    return (v, x)\n",
              std::string(kHead) +
                  "    constant: \"f32[2][1]cpu\" = coil.constant([1.0, 2.0])\n"
                  "    m = coil.mul(constant, 3)\n"
                  "    v = coil.view(m, [1, 2])\n"
                  "    return (v, x)\n");
}

// as_strided reads the storage behind its input, which folding would replace.
TEST(ConstantFolding, LeavesInputsOfAsStrided) {
  expect_no_change(run_constant_folding,
                   std::string(kHead) +
                       "    c: \"f32[2, 2][2, 1]cpu\" = coil.constant([1.0, 2.0, 3.0, 4.0])\n"
                       "    s = coil.slice(c, 0, 1)\n"
                       "    a = coil.as_strided(s, [2], [1], 0)\n"
                       "    b = coil.add(x, a)\n"
                       "    return (b,)\n");
}

// Integer division by zero fails when the program runs, not when it compiles.
TEST(ConstantFolding, LeavesCallsWhoseKernelFails) {
  expect_no_change(run_constant_folding,
                   R"(def forward(self, x: "i64[2][1]cpu"):
    c: "i64[2][1]cpu" = coil.constant([1, 0])
    d = coil.remainder(c, c)
    a = coil.add(x, d)
    return (a,)
)");
}

}  // namespace
