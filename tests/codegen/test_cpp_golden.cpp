// Golden text for the CPU backend's kernels on small graphs: a change in code generation shows
// up here as a visible diff. (Update the expected text when a change is meant.)
#include "backends/cpu/cpp_kernel.h"
#include "testing_stages.h"
#include "testing.h"

using namespace coil;
using testing_stages::Compiled;
using testing_stages::lowered_and_scheduled;

TEST(Golden, PointwiseKernelSource) {
  Compiled c = lowered_and_scheduled(
      R"(def forward(self, x: "f32[40][1]cpu", y: "f32[40][1]cpu"):
    mul: "f32[40][1]cpu" = coil.mul(x, y)
    exp: "f32[40][1]cpu" = coil.exp(mul)
    return (exp,)
)");
  ASSERT_EQ(c.schedule.kernels.size(), 1u);
  codegen::KernelSource k = cpu::generate_kernel(c.schedule.kernels[0], c.program);
  EXPECT_EQ(k.code, R"(extern "C" void poi_fused_mul_exp_0(void* const* args) {
  const float* __restrict in0 = (const float*)args[0];
  const float* __restrict in1 = (const float*)args[1];
  float* __restrict buf0 = (float*)args[2];
  i64 x0 = 0;
  for (; x0 + COIL_VEC <= 40; x0 += COIL_VEC) {
    vf32 t0 = vload(in0 + x0);
    vf32 t1 = vload(in1 + x0);
    vf32 t2 = (t0 * t1);
    vf32 t3 = vexp(t2);
    vstore(buf0 + x0, t3);
  }
  for (; x0 < 40; ++x0) {
    float t4 = in0[x0];
    float t5 = in1[x0];
    float t6 = (t4 * t5);
    float t7 = __builtin_expf(t6);
    buf0[x0] = (float)(t7);
  }
}
)");
  EXPECT_TRUE(k.vectorized);
  EXPECT_FALSE(k.parallel);
}

// A reduction over the outer dim of a row-major tensor runs along memory: chunks of outputs
// folded one row at a time with vector loads, no gathers.
TEST(Golden, ColumnReductionRunsAlongMemory) {
  Compiled c = lowered_and_scheduled(
      R"(def forward(self, x: "f32[64, 48][48, 1]cpu"):
    sum_1: "f32[48][1]cpu" = coil.sum(x, [0])
    return (sum_1,)
)");
  ASSERT_EQ(c.schedule.kernels.size(), 1u);
  codegen::KernelSource k = cpu::generate_kernel(c.schedule.kernels[0], c.program);
  EXPECT_NE(k.code.find("for (i64 r0 = 0; r0 < 64; ++r0)"), std::string::npos) << k.code;
  EXPECT_NE(k.code.find("vload(in0 + 48*r0 + x0)"), std::string::npos) << k.code;
  EXPECT_EQ(k.code.find("k_"), std::string::npos) << k.code;  // no per-lane gather
  EXPECT_TRUE(k.vectorized);
}

// A row's variance, short enough for L1, is two passes over the row (the mean, then squared
// deviations); no Welford update.
TEST(Golden, RowVarianceTakesTwoPasses) {
  Compiled c = lowered_and_scheduled(
      R"(def forward(self, x: "f32[64, 48][48, 1]cpu"):
    var_1: "f32[64][1]cpu" = coil.var(x, [1])
    return (var_1,)
)");
  std::string code;
  for (const schedule::Kernel& kernel : c.schedule.kernels) {
    codegen::KernelSource k = cpu::generate_kernel(kernel, c.program);
    EXPECT_TRUE(k.vectorized);
    code += k.code;
  }
  EXPECT_EQ(code.find("welford"), std::string::npos) << code;
  // The mean once per row, then the squared deviations from it in a second pass.
  EXPECT_NE(code.find("= (red_buf0_sum / 48.0f);"), std::string::npos) << code;
  EXPECT_NE(code.find("vacc_buf0 += "), std::string::npos) << code;
}

// 16-bit rows are vector code too: read widened to float32 lanes, written rounded back (the
// random programs check the values: tests/fuzz).
TEST(Golden, SixteenBitRowsAreVectorCode) {
  for (const std::string t : {"bf16", "f16"}) {
    SCOPED_TRACE(t);
    Compiled c = lowered_and_scheduled("def forward(self, x: \"" + t +
                                       "[64, 512][512, 1]cpu\"):\n"
                                       "    s = coil.sum(x, [1], True)\n"
                                       "    y = coil.div(x, s)\n"
                                       "    return (y,)\n");
    ASSERT_EQ(c.schedule.kernels.size(), 1u);
    codegen::KernelSource k = cpu::generate_kernel(c.schedule.kernels[0], c.program);
    EXPECT_TRUE(k.vectorized);
    EXPECT_NE(k.code.find("vload_" + t + "("), std::string::npos) << k.code;
    EXPECT_NE(k.code.find("vstore_" + t + "("), std::string::npos) << k.code;
  }
}

// A long row's reductions keep several accumulators (four for the maximum, two for the sum
// of exps), and its exp pass prefetches the next row's input (the last row its own); a short
// row does neither.
TEST(Golden, LongRowsSplitAccumulatorsAndPrefetchTheNextRow) {
  auto softmax_code = [](int64_t n) {
    const std::string row = std::to_string(n), shape = "\"f32[8, " + row + "][" + row + ", 1]cpu\"";
    Compiled c = lowered_and_scheduled("def forward(self, x: " + shape +
                                       "):\n"
                                       "    m: \"f32[8, 1][1, 1]cpu\" = coil.amax(x, [1], True)\n"
                                       "    d: " +
                                       shape +
                                       " = coil.sub(x, m)\n"
                                       "    e: " +
                                       shape +
                                       " = coil.exp(d)\n"
                                       "    s: \"f32[8, 1][1, 1]cpu\" = coil.sum(e, [1], True)\n"
                                       "    y: " +
                                       shape +
                                       " = coil.div(e, s)\n"
                                       "    return (y,)\n");
    EXPECT_EQ(c.schedule.kernels.size(), 1u);
    return c.schedule.kernels.empty() ? std::string()
                                      : cpu::generate_kernel(c.schedule.kernels[0], c.program).code;
  };
  std::string code = softmax_code(512);
  for (const char* part :
       {"vf32 vacc_buf0_3", "vf32 vacc_buf1_1", "vacc_buf0 = vmax(vacc_buf0, vacc_buf0_3);",
        "const i64 x0_next = x0 < 7 ? x0 + 1 : x0;", "__builtin_prefetch(in0 + r0 + 512*x0_next);"})
    EXPECT_NE(code.find(part), std::string::npos) << part << "\n" << code;
  EXPECT_EQ(code.find("vacc_buf1_2"), std::string::npos) << code;
  code = softmax_code(64);
  EXPECT_EQ(code.find("vacc_buf0_1"), std::string::npos) << code;
  EXPECT_EQ(code.find("prefetch"), std::string::npos) << code;
}

// Welford's variance over the outer dim folds along memory the same way as a sum, its running
// means in a chunk-sized array.
TEST(Golden, ColumnVarianceRunsAlongMemory) {
  Compiled c = lowered_and_scheduled(
      R"(def forward(self, x: "f32[64, 48][48, 1]cpu"):
    var_1: "f32[48][1]cpu" = coil.var(x, [0])
    return (var_1,)
)");
  ASSERT_GE(c.schedule.kernels.size(), 1u);
  codegen::KernelSource k = cpu::generate_kernel(c.schedule.kernels[0], c.program);
  EXPECT_NE(k.code.find("float wmean_"), std::string::npos) << k.code;
  EXPECT_NE(k.code.find("vload(in0 + 48*r0 + x0)"), std::string::npos) << k.code;
  EXPECT_EQ(k.code.find("k_"), std::string::npos) << k.code;
  EXPECT_TRUE(k.vectorized);
}
