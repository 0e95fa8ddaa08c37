// Common subexpression elimination: equal calls, getitems and constants merge into the first;
// random calls, side effects and calls that differ in any argument do not.
#include "pass_testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

const char* kHead = "def forward(self, x: \"f32[4, 6][6, 1]cpu\", y: \"f32[6][1]cpu\"):\n";

TEST(Cse, MergesEqualCallsAndWhatTheyFeed) {
  expect_pass(run_cse,
              std::string(kHead) +
                  "    a = coil.add(x, y)\n"
                  "    b = coil.add(x, y)\n"
                  "    sa = coil.sin(a)\n"
                  "    sb = coil.sin(b)\n"
                  "    s = coil.sum(sa, [1], keepdim=True)\n"
                  "    t = coil.sum(sb, [1], True)\n"
                  "    m = coil.mul(s, t)\n"
                  "    return (m,)\n",
              std::string(kHead) +
                  "    a = coil.add(x, y)\n"
                  "    sa = coil.sin(a)\n"
                  "    s = coil.sum(sa, [1], keepdim=True)\n"
                  "    m = coil.mul(s, s)\n"
                  "    return (m,)\n");
}

TEST(Cse, MergesMultiOutputCallsGetitemsAndConstants) {
  expect_pass(run_cse,
              std::string(kHead) +
                  "    c1: \"f32[2][1]cpu\" = coil.constant([1.0, -0.0])\n"
                  "    c2: \"f32[2][1]cpu\" = coil.constant([1.0, -0.0])\n"
                  "    s1 = coil.split(x, 2)\n"
                  "    s2 = coil.split(x, 2)\n"
                  "    a = s1[1]\n"
                  "    b = s2[1]\n"
                  "    d = coil.sub(a, b)\n"
                  "    c = coil.mul(c1, c2)\n"
                  "    return (d, c)\n",
              std::string(kHead) +
                  "    c1: \"f32[2][1]cpu\" = coil.constant([1.0, -0.0])\n"
                  "    s1 = coil.split(x, 2)\n"
                  "    a = s1[1]\n"
                  "    d = coil.sub(a, a)\n"
                  "    c = coil.mul(c1, c1)\n"
                  "    return (d, c)\n");
}

TEST(Cse, KeepsCallsThatDifferInAnyArgument) {
  expect_no_change(run_cse, std::string(kHead) +
                                "    a = coil.add(x, 1)\n"
                                "    b = coil.add(x, 1.0)\n"  // a float: promotes differently
                                "    c = coil.mul(x, 0.0)\n"
                                "    d = coil.mul(x, -0.0)\n"  // -0.0 is not 0.0 bit for bit
                                "    e = coil.sum(x, [1])\n"
                                "    f = coil.sum(x, [1], True)\n"
                                "    g = coil.add(y, x)\n"  // operands in another order
                                "    h: \"f32[2][1]cpu\" = coil.constant([1.0, 0.0])\n"
                                "    i: \"f32[2][1]cpu\" = coil.constant([1.0, -0.0])\n"
                                "    return (a, b, c, d, e, f, g, h, i)\n");
}

// A dim counted from the end is the dim counted from the front (layer norm's decomposition
// sums over [-1], its derivative formula over [1]), and a reduction's dims are a set; an
// unsqueeze's dim counts in its result's rank, so unsqueeze(x, -1) is not unsqueeze(x, 1).
TEST(Cse, MergesDimsCountedFromEitherEnd) {
  expect_pass(run_cse,
              std::string(kHead) +
                  "    a = coil.sum(x, [-1], True)\n"
                  "    b = coil.sum(x, [1], True)\n"
                  "    c = coil.var(x, [0, -1])\n"
                  "    d = coil.var(x, [1, 0])\n"
                  "    e = coil.softmax(x, -1)\n"
                  "    f = coil.softmax(x, 1)\n"
                  "    u = coil.unsqueeze(x, -1)\n"
                  "    v = coil.unsqueeze(x, 1)\n"
                  "    ab = coil.add(a, b)\n"
                  "    cd = coil.add(c, d)\n"
                  "    ef = coil.add(e, f)\n"
                  "    return (ab, cd, ef, u, v)\n",
              std::string(kHead) +
                  "    a = coil.sum(x, [-1], True)\n"
                  "    c = coil.var(x, [0, -1])\n"
                  "    e = coil.softmax(x, -1)\n"
                  "    u = coil.unsqueeze(x, -1)\n"
                  "    v = coil.unsqueeze(x, 1)\n"
                  "    ab = coil.add(a, a)\n"
                  "    cd = coil.add(c, c)\n"
                  "    ef = coil.add(e, e)\n"
                  "    return (ab, cd, ef, u, v)\n");
}

TEST(Cse, MergesNaNArguments) {
  expect_pass(run_cse,
              std::string(kHead) +
                  "    a = coil.clamp(x, nan)\n"
                  "    b = coil.clamp(x, nan)\n"
                  "    s = coil.add(a, b)\n"
                  "    return (s,)\n",
              std::string(kHead) +
                  "    a = coil.clamp(x, nan)\n"
                  "    s = coil.add(a, a)\n"
                  "    return (s,)\n");
}

TEST(Cse, NeverMergesRandomCalls) {
  expect_no_change(run_cse, std::string(kHead) +
                                "    r1 = coil.rand([4, 6])\n"
                                "    r2 = coil.rand([4, 6])\n"
                                "    n1 = coil.randn([3])\n"
                                "    n2 = coil.randn([3])\n"
                                "    i1 = coil.randint(0, 5, [3])\n"
                                "    i2 = coil.randint(0, 5, [3])\n"
                                "    d1 = coil.dropout(x, 0.5, True)\n"
                                "    d2 = coil.dropout(x, 0.5, True)\n"
                                "    return (r1, r2, n1, n2, i1, i2, d1, d2)\n");
}

// Dropout that drops nothing (p = 0, or in eval mode) is not random: it merges.
TEST(Cse, MergesDropoutThatDrawsNothing) {
  expect_pass(run_cse,
              std::string(kHead) +
                  "    d1 = coil.dropout(x, 0.5, False)\n"
                  "    d2 = coil.dropout(x, 0.5, False)\n"
                  "    e1 = coil.dropout(x, 0.0, True)\n"
                  "    e2 = coil.dropout(x, 0.0, True)\n"
                  "    s = coil.add(d1, d2)\n"
                  "    t = coil.add(e1, e2)\n"
                  "    return (s, t)\n",
              std::string(kHead) +
                  "    d1 = coil.dropout(x, 0.5, False)\n"
                  "    e1 = coil.dropout(x, 0.0, True)\n"
                  "    s = coil.add(d1, d1)\n"
                  "    t = coil.add(e1, e1)\n"
                  "    return (s, t)\n");
}

// The program returned two tensors; after merging it would return one twice, and a caller
// writing to one result would change the other.
TEST(Cse, KeepsDistinctResultsDistinct) {
  expect_no_change(run_cse, std::string(kHead) +
                                "    a = coil.clone(x)\n"
                                "    b = coil.clone(x)\n"
                                "    s = coil.sin(x)\n"
                                "    t = coil.sin(x)\n"
                                "    v = coil.view(t, [24])\n"  // a view of a result
                                "    return (a, b, s, v)\n");
  // One of them returned: merging is invisible.
  expect_pass(run_cse,
              std::string(kHead) +
                  "    s = coil.sin(x)\n"
                  "    t = coil.sin(x)\n"
                  "    u = coil.exp(t)\n"
                  "    return (s, u)\n",
              std::string(kHead) +
                  "    s = coil.sin(x)\n"
                  "    u = coil.exp(s)\n"
                  "    return (s, u)\n");
}

TEST(Cse, NeverMergesSideEffects) {
  expect_no_change(
      run_cse,
      R"(def forward(self, x: "f32[2, 3, 4, 4][48, 16, 4, 1]cpu", rm: "f32[3][1]cpu", rv: "f32[3][1]cpu"):
    a = coil.batch_norm(x, None, None, rm, rv, True)
    b = coil.batch_norm(x, None, None, rm, rv, True)
    return (a, b)
)");
}

}  // namespace
