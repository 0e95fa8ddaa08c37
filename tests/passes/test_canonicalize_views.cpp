// View canonicalisation: transpose/t as permute, permutes merged, reshape chains of contiguous
// tensors merged, unsqueeze-squeeze pairs removed; and the cases each rule must leave alone.
#include "pass_testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

const char* kHead = "def forward(self, x: \"f32[2, 3, 4][12, 4, 1]cpu\"):\n";

TEST(CanonicalizeViews, TransposeAndTBecomePermute) {
  expect_pass(run_canonicalize_views,
              std::string(kHead) +
                  "    s = coil.sin(x)\n"
                  "    a = coil.transpose(s, -1, 0)\n"
                  "    v = coil.select(s, 0, 1)\n"
                  "    b = coil.t(v)\n"
                  "    return (a, b)\n",
              std::string(kHead) +
                  "    s = coil.sin(x)\n"
                  "    permute = coil.permute(s, [2, 1, 0])\n"
                  "    v = coil.select(s, 0, 1)\n"
                  "    permute_1 = coil.permute(v, [1, 0])\n"
                  "    return (permute, permute_1)\n");
}

TEST(CanonicalizeViews, MergesPermutes) {
  expect_pass(run_canonicalize_views,
              std::string(kHead) +
                  "    s = coil.sin(x)\n"
                  "    a = coil.permute(s, [1, 2, 0])\n"
                  "    b = coil.permute(a, [2, -3, 1])\n"
                  "    c = coil.transpose(b, 0, 1)\n"
                  "    return (c,)\n",
              std::string(kHead) +
                  "    s = coil.sin(x)\n"
                  "    permute_1 = coil.permute(s, [1, 0, 2])\n"
                  "    return (permute_1,)\n");
}

TEST(CanonicalizeViews, MergesReshapeChainsOfContiguousTensors) {
  expect_pass(run_canonicalize_views,
              std::string(kHead) +
                  "    s = coil.sin(x)\n"
                  "    a = coil.view(s, [6, 4])\n"
                  "    b = coil.unsqueeze(a, 0)\n"
                  "    c = coil.flatten(b, 1)\n"
                  "    d = coil.unflatten(c, 1, [2, 12])\n"
                  "    e = coil.squeeze(d, [0])\n"
                  "    return (e, a)\n",
              std::string(kHead) +
                  "    s = coil.sin(x)\n"
                  "    a = coil.view(s, [6, 4])\n"
                  "    reshape_3 = coil.reshape(s, [2, 12])\n"
                  "    return (reshape_3, a)\n");
}

// A chain over a non-contiguous tensor may copy somewhere in the middle: left as it is.
TEST(CanonicalizeViews, KeepsReshapeChainsOfNonContiguousTensors) {
  expect_no_change(run_canonicalize_views, std::string(kHead) +
                                               "    s = coil.sin(x)\n"
                                               "    p = coil.permute(s, [2, 0, 1])\n"
                                               "    a = coil.reshape(p, [4, 6])\n"
                                               "    b = coil.unsqueeze(a, 0)\n"
                                               "    return (b,)\n");
}

TEST(CanonicalizeViews, RemovesUnsqueezeUndoneBySqueeze) {
  // Works on any layout, unlike the reshape chains.
  expect_pass(run_canonicalize_views,
              std::string(kHead) +
                  "    s = coil.sin(x)\n"
                  "    p = coil.permute(s, [2, 0, 1])\n"
                  "    a = coil.unsqueeze(p, -2)\n"
                  "    b = coil.squeeze(a, [2])\n"
                  "    c = coil.cos(b)\n"
                  "    return (c,)\n",
              std::string(kHead) +
                  "    s = coil.sin(x)\n"
                  "    p = coil.permute(s, [2, 0, 1])\n"
                  "    c = coil.cos(p)\n"
                  "    return (c,)\n");
  expect_no_change(run_canonicalize_views,
                   std::string(kHead) +
                       "    s = coil.sin(x)\n"
                       "    p = coil.permute(s, [2, 0, 1])\n"
                       "    u = coil.unsqueeze(p, 0)\n"
                       "    a = coil.unsqueeze(u, 2)\n"
                       "    b = coil.squeeze(a, [0])\n"  // squeezes the other unit dim
                       "    return (b,)\n");
}

// A reshape chain of the input itself becomes a reshape of the input: still a view of it.
TEST(CanonicalizeViews, ViewsOfInputsStayViews) {
  expect_pass(run_canonicalize_views,
              std::string(kHead) +
                  "    a = coil.flatten(x)\n"
                  "    b = coil.view(a, [4, 6])\n"
                  "    return (b,)\n",
              std::string(kHead) +
                  "    reshape = coil.reshape(x, [4, 6])\n"
                  "    return (reshape,)\n");
}

}  // namespace
