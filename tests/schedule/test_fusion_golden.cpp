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
      "red_fused_amax_sub_exp_sum_div_0: for x0 < 4; reduce r0 < 8\n"
      "    buf0 (register)[x0] = max load(in0, r0 + 8*x0)\n"
      "    buf1 (register)[x0] = sum softmaxExp(sub(load(in0, r0 + 8*x0), load(buf0, x0)))\n"
      "    buf2[r0 + 8*x0] = softmaxDiv(softmaxExp(sub(load(in0, r0 + 8*x0), load(buf0, x0))), "
      "load(buf1, x0))  (inner)\n");
}

// Whether some fusion decision of `c` contains `text`.
bool decided(const Compiled& c, const std::string& text) {
  for (const schedule::FusionDecision& d : c.schedule.decisions)
    if (d.str().find(text) != std::string::npos) return true;
  return false;
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
  EXPECT_TRUE(decided(c, "do not fuse buf1 into red_fused_sum_0: different reduction ranges"));
}

// A kernel is named as Inductor's are: its kind, the ops it fuses in the order it computes them
// (at most kMaxNameOps), its number.
TEST(Golden, KernelsAreNamedByWhatTheyFuse) {
  Compiled c = lowered_and_scheduled(
      R"(def forward(self, x: "f32[6, 8][8, 1]cpu"):
    sin: "f32[6, 8][8, 1]cpu" = coil.sin(x)
    cos: "f32[6, 8][8, 1]cpu" = coil.cos(sin)
    exp: "f32[6, 8][8, 1]cpu" = coil.exp(cos)
    abs_1: "f32[6, 8][8, 1]cpu" = coil.abs(exp)
    neg: "f32[6, 8][8, 1]cpu" = coil.neg(abs_1)
    tanh: "f32[6, 8][8, 1]cpu" = coil.tanh(neg)
    sigmoid: "f32[6, 8][8, 1]cpu" = coil.sigmoid(tanh)
    relu: "f32[6, 8][8, 1]cpu" = coil.relu(sigmoid)
    sqrt: "f32[6, 8][8, 1]cpu" = coil.sqrt(relu)
    sum_1: "f32[6][1]cpu" = coil.sum(sqrt, [1])
    return (sum_1,)
)");
  ASSERT_EQ(c.schedule.kernels.size(), 1u);
  EXPECT_EQ(c.schedule.kernels[0].name, "red_fused_sin_cos_exp_abs_neg_tanh_sigmoid_relu_0");
  EXPECT_TRUE(decided(c, "new red_fused_sin_cos_exp_abs_neg_tanh_sigmoid_relu_0 for buf0"));
}

// A product's operand that is a transposed value not yet in memory (an activation recomputed
// for a weight's gradient) is written in its own order, once, and handed to both products as
// views: the transposed one with strides [1, 8], no transposing kernel, no second copy.
TEST(Golden, ProductOperandsAreWrittenOnceInTheirOwnOrder) {
  Compiled c = lowered_and_scheduled(
      R"(def forward(self, x: "f32[4, 8][8, 1]cpu", g: "f32[4, 6][6, 1]cpu", w: "f32[8, 6][6, 1]cpu"):
    sin: "f32[4, 8][8, 1]cpu" = coil.sin(x)
    permute: "f32[8, 4][1, 8]cpu" = coil.permute(sin, [1, 0])
    mm: "f32[8, 6][6, 1]cpu" = coil.mm(permute, g)
    mm_1: "f32[4, 6][6, 1]cpu" = coil.mm(sin, w)
    reshape: "f32[2, 2, 8][16, 8, 1]cpu" = coil.reshape(sin, [2, 2, 8])
    return (mm, mm_1, reshape)
)");
  EXPECT_EQ(ir::to_string(c.program),
            "in0: f32[4, 8][8, 1] = input 0\n"
            "in1: f32[4, 6][6, 1] = input 1\n"
            "in2: f32[8, 6][6, 1] = input 2\n"
            "buf0: f32[4, 8][8, 1] = pointwise[4, 8](i0, i1: sin(load(in0, 8*i0 + i1)))\n"
            "buf1: f32[8, 6][6, 1] = extern mm(buf0 f32[8, 4][1, 8], in1 f32[4, 6][6, 1])  "
            "# library kernel\n"
            "buf2: f32[4, 6][6, 1] = extern mm(buf0 f32[4, 8][8, 1], in2 f32[8, 6][6, 1])  "
            "# library kernel\n"
            "return (buf1 f32[8, 6][6, 1], buf2 f32[4, 6][6, 1], buf0 f32[2, 2, 8][16, 8, 1])\n");
}

// A value a product reads from memory, and that recomputing would read more than once per
// element (a GELU's gradient: the incoming gradient and the activation), is written when it is
// made: the bias's sum lowered before the weight's product reads the written value instead of
// recomputing it from its two inputs.
TEST(Golden, AValueAProductReadsIsWrittenBeforeItsOtherUsers) {
  Compiled c = lowered_and_scheduled(
      R"(def forward(self, g: "f32[4, 8][8, 1]cpu", h: "f32[4, 8][8, 1]cpu", x: "f32[4, 6][6, 1]cpu"):
    exp: "f32[4, 8][8, 1]cpu" = coil.exp(h)
    mul: "f32[4, 8][8, 1]cpu" = coil.mul(g, exp)
    sum_1: "f32[8][1]cpu" = coil.sum(mul, [0])
    permute: "f32[8, 4][1, 8]cpu" = coil.permute(mul, [1, 0])
    mm: "f32[8, 6][6, 1]cpu" = coil.mm(permute, x)
    return (sum_1, mm)
)");
  EXPECT_EQ(ir::to_string(c.program),
            "in0: f32[4, 8][8, 1] = input 0\n"
            "in1: f32[4, 8][8, 1] = input 1\n"
            "in2: f32[4, 6][6, 1] = input 2\n"
            "buf0: f32[4, 8][8, 1] = pointwise[4, 8](i0, i1: mul(load(in0, 8*i0 + i1), "
            "exp(load(in1, 8*i0 + i1))))\n"
            "buf1: f32[8][1] = reduce_sum[8][4](i0; j0: load(buf0, i0 + 8*j0))\n"
            "buf2: f32[8, 6][6, 1] = extern mm(buf0 f32[8, 4][1, 8], in2 f32[4, 6][6, 1])  "
            "# library kernel\n"
            "return (buf1 f32[8][1], buf2 f32[8, 6][6, 1])\n");
}

// A reduction does not take inside its loop a pointwise kernel it reads nothing of and shares no
// load with (a bias's gradient down the columns beside a pass along the rows of another
// tensor): each kernel keeps its own order.
TEST(Golden, AReductionDoesNotJoinAnUnrelatedPointwiseKernel) {
  Compiled c = lowered_and_scheduled(
      R"(def forward(self, x: "f32[64, 32][32, 1]cpu", y: "f32[64, 32][32, 1]cpu"):
    sin: "f32[64, 32][32, 1]cpu" = coil.sin(x)
    sum_1: "f32[32][1]cpu" = coil.sum(y, [0])
    return (sin, sum_1)
)");
  EXPECT_EQ(c.schedule.kernels.size(), 2u);
  EXPECT_TRUE(decided(c, "reads none of the elements the kernel reads"));
}

// A variance over few long rows on the GPU (a batch norm's statistics per channel): two sums,
// the mean's and the squared deviations', each split into partials over pieces of the rows, so
// that the partials' kernels have thousands of rows; on the CPU, Welford's one pass.
TEST(Golden, FewLongVariancesOnTheGpuAreTwoSplitSums) {
  auto graph = [](const std::string& device) {
    return "def forward(self, x: \"f32[32, 256, 56, 56][802816, 3136, 56, 1]" + device +
           "\"):\n    var: \"f32[1, 256, 1, 1][256, 1, 1, 1]" + device +
           "\" = coil.var(x, [0, 2, 3], 0.0, True)\n    return (var,)\n";
  };
  Compiled gpu = lowered_and_scheduled(graph("cuda"));
  const std::string ir = ir::to_string(gpu.program);
  EXPECT_EQ(ir.find("welford"), std::string::npos) << ir;
  ASSERT_EQ(gpu.schedule.kernels.size(), 5u) << ir;
  EXPECT_EQ(schedule::to_string(gpu.schedule.kernels[0]).substr(0, 52),
            "red_fused_var_0: for x0 < 256, x1 < 128; reduce r0 <")
      << ir;
  Compiled cpu = lowered_and_scheduled(graph("cpu"));
  EXPECT_NE(ir::to_string(cpu.program).find("welford"), std::string::npos);
}

// Unrelated updates of one size (an optimizer's, parameter by parameter) share a loop only
// while it walks at most 16 arrays: on the CPU the cores' prefetchers follow few more, on the GPU
// each thread would hold every update's loads.
TEST(Golden, UnrelatedLoopsWalkFewArrays) {
  auto graph = [](const std::string& device) {
    std::string sig = "def forward(self", body, ret = "    return (";
    const std::string t = "\"f32[64][1]" + device + "\"";
    for (int i = 0; i < 6; ++i) {
      const std::string n = std::to_string(i);
      sig += ", a" + n + ": " + t + ", b" + n + ": " + t + ", c" + n + ": " + t;
      body += "    mul_" + n + ": " + t + " = coil.mul(a" + n + ", b" + n + ")\n";
      body += "    add_" + n + ": " + t + " = coil.add(mul_" + n + ", c" + n + ")\n";
      ret += "add_" + n + ", ";
    }
    return sig + "):\n" + body + ret + ")\n";
  };
  for (const std::string device : {"cpu", "cuda"}) {
    Compiled c = lowered_and_scheduled(graph(device));
    ASSERT_EQ(c.schedule.kernels.size(), 1u) << device;  // one launch (a combo kernel) of
    EXPECT_EQ(c.schedule.kernels[0].parts.size(), 2u);   // four updates (16 arrays), then two
    EXPECT_TRUE(decided(c, "arrays at once"));
  }
}

// A channels-last batch norm's statistics on the GPU: the channels are the columns, the kept
// dims of one after them, and the reduction is cut across its rows (256 pieces of 1568 rows for
// 64 channels, enough column pieces to fill the GPU), each piece read down the columns, never
// into runs of one channel's elements 64 apart.
TEST(Golden, ChannelsLastStatisticsAreCutAcrossTheirRows) {
  Compiled c = lowered_and_scheduled(
      R"(def forward(self, x: "bf16[32, 64, 112, 112][802816, 1, 7168, 64]cuda:0"):
    to_dtype: "f32[32, 64, 112, 112][802816, 1, 7168, 64]cuda:0" = coil.to_dtype(x, coil.float32)
    sum_1: "f32[1, 64, 1, 1][64, 1, 1, 1]cuda:0" = coil.sum(to_dtype, [0, 2, 3], True)
    return (sum_1,)
)");
  EXPECT_EQ(ir::to_string(c.program),
            "in0: bf16[32, 64, 112, 112][802816, 1, 7168, 64] = input 0\n"
            "buf0: f32[256, 1, 64, 1, 1][64, 64, 1, 1, 1] = reduce_sum[256, 1, 64, 1, 1][1568](i0, "
            "i1, i2, i3, i4; j0: to_f32(load(in0, 100352*i0 + i2 + 64*j0)))\n"
            "buf1: f32[1, 64, 1, 1][64, 1, 1, 1] = reduce_sum[1, 64, 1, 1][256](i0, i1, i2, i3; "
            "j0: load(buf0, i1 + 64*j0))\n"
            "return (buf1 f32[1, 64, 1, 1][64, 1, 1, 1])\n");
  ASSERT_EQ(c.schedule.kernels.size(), 2u);
  EXPECT_EQ(schedule::to_string(c.schedule.kernels[0]),
            "red_fused_to_dtype_sum_0: for x0 < 256, x1 < 64; reduce r0 < 1568\n"
            "    buf0[64*x0 + x1] = sum to_f32(load(in0, 64*r0 + 100352*x0 + x1))\n");
}
