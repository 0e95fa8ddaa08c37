// No-op removal: each identity (x + 0, x * 1, a cast to the same dtype, a view to the same
// geometry, clone) goes, unless the input differs in dtype, sizes or strides, or the graph
// would start to return its own input.
#include "pass_testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

const char* kHead = "def forward(self, x: \"f32[4, 6][6, 1]cpu\", y: \"f32[6][1]cpu\"):\n";

TEST(RemoveNoops, RemovesArithmeticIdentities) {
  expect_pass(run_remove_noops,
              std::string(kHead) +
                  "    z: \"f32[1][1]cpu\" = coil.constant([0.0])\n"
                  "    s = coil.sin(x)\n"
                  "    a = coil.add(s, 0)\n"
                  "    b = coil.add(z, a)\n"
                  "    c = coil.sub(b, 0.0)\n"
                  "    d = coil.mul(c, 1)\n"
                  "    e = coil.mul(1.0, d)\n"
                  "    f = coil.div(e, 1)\n"
                  "    g = coil.pow(f, 1)\n"
                  "    h = coil.add(g, y)\n"
                  "    return (h,)\n",
              std::string(kHead) +
                  "    s = coil.sin(x)\n"
                  "    h = coil.add(s, y)\n"
                  "    return (h,)\n");
}

TEST(RemoveNoops, RemovesIdentityCastsCopiesAndViews) {
  expect_pass(run_remove_noops,
              std::string(kHead) +
                  "    s = coil.sin(x)\n"
                  "    a = coil.to_dtype(s, coil.float32)\n"
                  "    b = coil.clone(a)\n"
                  "    c = coil.contiguous(b)\n"
                  "    d = coil.view(c, [4, 6])\n"
                  "    e = coil.reshape(d, [4, -1])\n"
                  "    f = coil.expand(e, [4, 6])\n"
                  "    g = coil.permute(f, [0, 1])\n"
                  "    h = coil.slice(g, 1, 0, 6)\n"
                  "    i = coil.squeeze(h)\n"
                  "    return (i,)\n",
              std::string(kHead) +
                  "    s = coil.sin(x)\n"
                  "    return (s,)\n");
}

// Broadcasting and type promotion make the result differ from the input: those stay.
TEST(RemoveNoops, KeepsIdentitiesThatBroadcastOrPromote) {
  expect_no_change(run_remove_noops,
                   std::string(kHead) +
                       "    z: \"f32[3, 1, 1][1, 1, 1]cpu\" = coil.constant([0.0, 0.0, 0.0])\n"
                       "    a = coil.add(y, z)\n"  // [6] + [3, 1, 1] zeros is [3, 1, 6]
                       "    return (a,)\n");
  expect_no_change(run_remove_noops,
                   R"(def forward(self, i: "i64[3][1]cpu", h: "f16[3][1]cpu"):
    a = coil.add(i, 0.0)
)"                                             // int + float number is float32
                   "    b = coil.div(i, 1)\n"  // true division is float32
                   "    z: \"f32[1][1]cpu\" = coil.constant([0.0])\n"
                   "    d = coil.add(h, z)\n"  // a float32 tensor promotes f16
                   "    e = coil.to_dtype(h, coil.float32)\n"
                   "    return (a, b, d, e)\n");
}

TEST(RemoveNoops, KeepsWhatIsNotAnIdentity) {
  expect_no_change(run_remove_noops,
                   std::string(kHead) +
                       "    s = coil.sin(x)\n"
                       "    a = coil.add(s, 1)\n"
                       "    b = coil.mul(a, 0)\n"
                       "    c = coil.div(b, 1, \"floor\")\n"  // rounds
                       "    d = coil.pow(c, 0)\n"
                       "    e = coil.sub(0, d)\n"
                       "    f = coil.slice(e, 1, 0, 5)\n"
                       "    g = coil.permute(f, [1, 0])\n"
                       "    return (g,)\n");
}

// The program returned a fresh tensor; after the rewrite it would return its own input, and
// a caller writing to one would change the other.
TEST(RemoveNoops, NeverMakesAResultAliasAnInput) {
  expect_no_change(run_remove_noops,
                   std::string(kHead) +
                       "    w: \"f32[6][1]cpu\" = coil.parameter(\"w\")\n"
                       "    c: \"f32[6][1]cpu\" = coil.constant([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])\n"
                       "    a = coil.clone(x)\n"
                       "    b = coil.add(y, 0)\n"
                       "    d = coil.mul(w, 1)\n"
                       "    e = coil.to_dtype(c, coil.float32)\n"
                       "    v = coil.view(a, [24])\n"  // a view of the clone is a result too
                       "    return (v, b, d, e)\n");
}

// A result that already was a view of the input may become the input's own view.
TEST(RemoveNoops, KeepsAliasingThatWasThere) {
  expect_pass(run_remove_noops,
              std::string(kHead) +
                  "    a = coil.view(x, [4, 6])\n"
                  "    b = coil.contiguous(y)\n"
                  "    return (a, b)\n",
              std::string(kHead) + "    return (x, y)\n");
}

// clone of a non-contiguous tensor makes it contiguous: a later view may depend on that.
TEST(RemoveNoops, KeepsCopiesThatChangeStrides) {
  expect_no_change(run_remove_noops, std::string(kHead) +
                                         "    s = coil.sin(x)\n"
                                         "    t = coil.t(s)\n"
                                         "    c = coil.clone(t)\n"
                                         "    v = coil.view(c, [24])\n"
                                         "    return (v,)\n");
}

// as_strided addresses the storage behind its input: clone's is not its input's.
TEST(RemoveNoops, KeepsCopiesReadByAsStrided) {
  expect_no_change(run_remove_noops, std::string(kHead) +
                                         "    s = coil.sin(x)\n"
                                         "    n = coil.narrow(s, 0, 1, 2)\n"
                                         "    c = coil.clone(n)\n"
                                         "    a = coil.as_strided(c, [6], [1], 0)\n"
                                         "    return (a,)\n");
}

}  // namespace
