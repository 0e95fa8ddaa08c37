// Golden text for lowering and fusion on small graphs: a change in the loop IR or in a fusion
// decision shows up here as a visible diff. (Update the expected text when a change is meant.)
#include "testing.h"
#include "testing_stages.h"

using namespace coil;
using testing_stages::Compiled;
using testing_stages::lowered_and_scheduled;

// The softmax idiom lowers to softmaxExp and softmaxDiv (ir/value.h): no subnormal in between.
TEST(Golden, SoftmaxLowersToThreeBuffersAndFusesToOneKernel) {
  Compiled c = lowered_and_scheduled(
      R"(def forward(self, x: "f32[4, 8][8, 1]cpu"):
    amax: "f32[4, 1][1, 1]cpu" = coil.amax(x, [1], True)
    sub: "f32[4, 8][8, 1]cpu" = coil.sub(x, amax)
    exp: "f32[4, 8][8, 1]cpu" = coil.exp(sub)
    sum_1: "f32[4, 1][1, 1]cpu" = coil.sum(exp, [1], True)
    div: "f32[4, 8][8, 1]cpu" = coil.div(exp, sum_1)
    return (div,)
)");
  EXPECT_EQ(ir::to_string(c.program),
            "in0: f32[4, 8][8, 1] = input 0\n"
            "buf0: f32[4, 1][1, 1] = reduce_max[4, 1][8](i0, i1; j0: load(in0, 8*i0 + j0))\n"
            "buf1: f32[4, 1][1, 1] = reduce_sum[4, 1][8](i0, i1; j0: softmaxExp(sub(load(in0, 8*i0 "
            "+ j0), load(buf0, i0))))\n"
            "buf2: f32[4, 8][8, 1] = pointwise[4, 8](i0, i1: softmaxDiv(softmaxExp(sub(load(in0, "
            "8*i0 + i1), load(buf0, i0))), load(buf1, i0)))\n"
            "return (buf2 f32[4, 8][8, 1])\n");
  ASSERT_EQ(c.schedule.kernels.size(), 1u);
  EXPECT_EQ(
      schedule::to_string(c.schedule.kernels[0]),
      "kernel0: for x0 < 4; reduce r0 < 8\n"
      "    buf0 (register)[x0] = max load(in0, r0 + 8*x0)\n"
      "    buf1 (register)[x0] = sum softmaxExp(sub(load(in0, r0 + 8*x0), load(buf0, x0)))\n"
      "    buf2[r0 + 8*x0] = softmaxDiv(softmaxExp(sub(load(in0, r0 + 8*x0), load(buf0, x0))), "
      "load(buf1, x0))  (inner)\n");
}

// The fusion log says why two kernels stay apart.
TEST(Golden, FusionRefusalCarriesItsReason) {
  Compiled c = lowered_and_scheduled(
      R"(def forward(self, x: "f32[6, 8][8, 1]cpu"):
    sum_1: "f32[6][1]cpu" = coil.sum(x, [1])
    sum_2: "f32[8][1]cpu" = coil.sum(x, [0])
    return (sum_1, sum_2)
)");
  EXPECT_EQ(c.schedule.kernels.size(), 2u);
  bool found = false;
  for (const std::string& d : c.schedule.decisions)
    found |= d.find("do not fuse buf1 into kernel0: different reduction ranges") == 0;
  EXPECT_TRUE(found);
}
