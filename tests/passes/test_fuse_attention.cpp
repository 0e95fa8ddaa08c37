// fuse_attention: written-out attention becomes one scaled_dot_product_attention call, with
// the scale however the program wrote it, and stays as written where the rewrite would not
// compute the same value or would drop an intermediate someone reads.
#include "pass_testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

const char* kHead =
    R"(def forward(self, q: "f32[2, 6, 4][24, 4, 1]cpu", k: "f32[2, 5, 4][20, 4, 1]cpu", v: "f32[2, 5, 3][15, 3, 1]cpu"):
    kt = coil.permute(k, [0, 2, 1])
    s = coil.matmul(q, kt)
)";

// kHead, then `lines`, then softmax(`input`, `dim`) @ v, returning `results`.
std::string program(const std::string& lines, const std::string& input = "scaled",
                    const std::string& dim = "-1", const std::string& results = "(out,)") {
  return std::string(kHead) + lines + "    p = coil.softmax(" + input + ", " + dim +
         ")\n"
         "    out = coil.matmul(p, v)\n"
         "    return " +
         results + "\n";
}

std::string fused(const std::string& scale) {
  return "def forward(self, q: \"f32[2, 6, 4][24, 4, 1]cpu\", k: \"f32[2, 5, 4][20, 4, 1]cpu\", "
         "v: \"f32[2, 5, 3][15, 3, 1]cpu\"):\n"
         "    scaled_dot_product_attention = coil.scaled_dot_product_attention(q, k, v, None, "
         "0.0, False, " +
         scale +
         ")\n"
         "    return (scaled_dot_product_attention,)\n";
}

TEST(FuseAttention, TakesTheScaleAsWritten) {
  expect_pass(run_fuse_attention, program("    scaled = coil.mul(s, 0.5)\n"), fused("0.5"));
  expect_pass(run_fuse_attention, program("    scaled = coil.mul(0.25, s)\n"), fused("0.25"));
  expect_pass(run_fuse_attention, program("    scaled = coil.div(s, 2.0)\n"), fused("0.5"));
  expect_pass(run_fuse_attention, program("    scaled = coil.mul(s, 1)\n"), fused("1.0"));
  // No scale at all: the product feeds the softmax directly.
  expect_pass(run_fuse_attention, program("", "s", "2"), fused("1.0"));
}

// In 16 bits, and under autocast's casts around the softmax (float32 in, the operands' dtype
// out), the fused kernel keeps the scores in float32 (within the dtype's tolerance of eager).
TEST(FuseAttention, TakesSixteenBitAttentionAndAutocastsCasts) {
  const std::string head =
      R"(def forward(self, q: "bf16[6, 4][4, 1]cpu", k: "bf16[5, 4][4, 1]cpu", v: "bf16[5, 3][3, 1]cpu"):
    kt = coil.permute(k, [1, 0])
    s = coil.matmul(q, kt)
)";
  const std::string fused16 =
      R"(def forward(self, q: "bf16[6, 4][4, 1]cpu", k: "bf16[5, 4][4, 1]cpu", v: "bf16[5, 3][3, 1]cpu"):
    scaled_dot_product_attention = coil.scaled_dot_product_attention(q, k, v, None, 0.0, False, 1.0)
    return (scaled_dot_product_attention,)
)";
  expect_pass(run_fuse_attention, head + R"(    p = coil.softmax(s, -1)
    out = coil.matmul(p, v)
    return (out,)
)",
              fused16);
  expect_pass(run_fuse_attention, head + R"(    s32 = coil.to_dtype(s, coil.float32)
    p = coil.softmax(s32, -1)
    p16 = coil.to_dtype(p, coil.bfloat16)
    out = coil.matmul(p16, v)
    return (out,)
)",
              fused16);
  // Under autocast with float32 inputs: q, v and the key's transpose are cast to bfloat16.
  expect_pass(
      run_fuse_attention,
      R"(def forward(self, q: "f32[6, 4][4, 1]cpu", k: "f32[5, 4][4, 1]cpu", v: "f32[5, 3][3, 1]cpu"):
    q16 = coil.to_dtype(q, coil.bfloat16)
    kt = coil.permute(k, [1, 0])
    kt16 = coil.to_dtype(kt, coil.bfloat16)
    s = coil.matmul(q16, kt16)
    s32 = coil.to_dtype(s, coil.float32)
    p = coil.softmax(s32, -1)
    p16 = coil.to_dtype(p, coil.bfloat16)
    v16 = coil.to_dtype(v, coil.bfloat16)
    out = coil.matmul(p16, v16)
    return (out,)
)",
      R"(def forward(self, q: "f32[6, 4][4, 1]cpu", k: "f32[5, 4][4, 1]cpu", v: "f32[5, 3][3, 1]cpu"):
    q16 = coil.to_dtype(q, coil.bfloat16)
    v16 = coil.to_dtype(v, coil.bfloat16)
    to_dtype = coil.to_dtype(k, coil.bfloat16)
    scaled_dot_product_attention = coil.scaled_dot_product_attention(q16, to_dtype, v16, None, 0.0, False, 1.0)
    return (scaled_dot_product_attention,)
)");
  // The float32 weights are a result too.
  expect_no_change(run_fuse_attention, head + R"(    s32 = coil.to_dtype(s, coil.float32)
    p = coil.softmax(s32, -1)
    p16 = coil.to_dtype(p, coil.bfloat16)
    out = coil.matmul(p16, v)
    return (out, p)
)");
}

TEST(FuseAttention, KeepsWhatItCannotFuse) {
  // The weights are a result too: they must still be computed.
  expect_no_change(run_fuse_attention,
                   program("    scaled = coil.mul(s, 0.5)\n", "scaled", "-1", "(out, p)"));
  // A softmax over the queries, not the keys.
  expect_no_change(run_fuse_attention, program("", "s", "1"));
  // A per-element scale is a mask, not a scale; a rounding division is not a scale either.
  expect_no_change(run_fuse_attention, program("    scaled = coil.mul(s, s)\n"));
  expect_no_change(run_fuse_attention, program("    scaled = coil.div(s, 2.0, \"floor\")\n"));
  // The key is not transposed (q @ k with k already [.., E, S] could be anything).
  expect_no_change(
      run_fuse_attention,
      R"(def forward(self, q: "f32[6, 4][4, 1]cpu", k: "f32[4, 5][5, 1]cpu", v: "f32[5, 3][3, 1]cpu"):
    s = coil.matmul(q, k)
    p = coil.softmax(s, -1)
    out = coil.matmul(p, v)
    return (out,)
)");
}

}  // namespace
