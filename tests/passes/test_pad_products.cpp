// Products padded to aligned sizes: each unaligned dim padded with zeros in the operands that
// have it (a transposed operand before its transpose), the result narrowed back, and copied out
// contiguous where the graph returns it; aligned, small or unpadded-device products unchanged.
#include "pass_testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

bool pad_to_8(Graph& g) {
  return pad_products(g, [](Device, DType) { return int64_t{8}; });
}

// The graph of `text` padded computes what it did.
void expect_padding_keeps_results(const std::string& text) {
  Graph original = parse_graph(text), g = parse_graph(text);
  EXPECT_TRUE(pad_to_8(g));
  expect_same_results(original, g, random_inputs(original));
}

TEST(PadProducts, PadsNThroughATransposedWeightAndCopiesTheResultOut) {
  expect_pass(pad_to_8,
              R"(def forward(self, x: "f32[64, 64][64, 1]cpu", w: "f32[67, 64][64, 1]cpu"):
    wt = coil.permute(w, [1, 0])
    m = coil.mm(x, wt)
    return (m,)
)",
              R"(def forward(self, x: "f32[64, 64][64, 1]cpu", w: "f32[67, 64][64, 1]cpu"):
    pad = coil.pad(w, [0, 0, 0, 5], "constant", 0.0)
    permute = coil.permute(pad, [1, 0])
    mm = coil.mm(x, permute)
    narrow = coil.narrow(mm, 1, 0, 67)
    contiguous = coil.contiguous(narrow)
    return (contiguous,)
)");
}

TEST(PadProducts, PadsKInBothOperandsWithoutNarrowing) {
  expect_pass(pad_to_8,
              R"(def forward(self, g: "f32[64, 67][67, 1]cpu", w: "f32[67, 64][64, 1]cpu"):
    m = coil.mm(g, w)
    return (m,)
)",
              R"(def forward(self, g: "f32[64, 67][67, 1]cpu", w: "f32[67, 64][64, 1]cpu"):
    pad = coil.pad(g, [0, 5], "constant", 0.0)
    pad_1 = coil.pad(w, [0, 0, 0, 5], "constant", 0.0)
    mm = coil.mm(pad, pad_1)
    return (mm,)
)");
}

// A weight's gradient g^T x with g's columns unaligned: M padded through the transpose, the
// rows cut off; read by a pointwise op, the narrowed view is not copied.
TEST(PadProducts, PadsMThroughATransposedOperand) {
  expect_pass(pad_to_8,
              R"(def forward(self, g: "f32[64, 67][67, 1]cpu", x: "f32[64, 72][72, 1]cpu"):
    gt = coil.permute(g, [1, 0])
    m = coil.mm(gt, x)
    r = coil.relu(m)
    return (r,)
)",
              R"(def forward(self, g: "f32[64, 67][67, 1]cpu", x: "f32[64, 72][72, 1]cpu"):
    pad = coil.pad(g, [0, 5], "constant", 0.0)
    permute = coil.permute(pad, [1, 0])
    mm = coil.mm(permute, x)
    narrow = coil.narrow(mm, 0, 0, 67)
    r = coil.relu(narrow)
    return (r,)
)");
}

TEST(PadProducts, PadsTheBiasAlongTheDimItHas) {
  expect_pass(
      pad_to_8,
      R"(def forward(self, b: "f32[67][1]cpu", x: "f32[64, 64][64, 1]cpu", w: "f32[67, 64][64, 1]cpu"):
    wt = coil.permute(w, [1, 0])
    m = coil.addmm_relu(b, x, wt)
    s = coil.sum(m)
    return (s,)
)",
      R"(def forward(self, b: "f32[67][1]cpu", x: "f32[64, 64][64, 1]cpu", w: "f32[67, 64][64, 1]cpu"):
    pad = coil.pad(w, [0, 0, 0, 5], "constant", 0.0)
    permute = coil.permute(pad, [1, 0])
    pad_1 = coil.pad(b, [0, 5], "constant", 0.0)
    addmm_relu = coil.addmm_relu(pad_1, x, permute)
    narrow = coil.narrow(addmm_relu, 1, 0, 67)
    s = coil.sum(narrow)
    return (s,)
)");
}

// Autocast's cast of a tied weight read transposed (w.t() cast to bf16): cast before the
// transpose, so that the cast and its pad write the weight's own order; the results equal.
TEST(PadProducts, CastsATransposedWeightBeforeItsTranspose) {
  const std::string cast_of_transpose =
      R"(def forward(self, x: "bf16[64, 64][64, 1]cpu", w: "f32[67, 64][64, 1]cpu"):
    wt = coil.permute(w, [1, 0])
    c = coil.to_dtype(wt, coil.bfloat16)
    m = coil.mm(x, c)
    return (m,)
)";
  expect_pass(pad_to_8, cast_of_transpose,
              R"(def forward(self, x: "bf16[64, 64][64, 1]cpu", w: "f32[67, 64][64, 1]cpu"):
    to_dtype = coil.to_dtype(w, coil.bfloat16)
    pad = coil.pad(to_dtype, [0, 0, 0, 5], "constant", 0.0)
    permute = coil.permute(pad, [1, 0])
    mm = coil.mm(x, permute)
    narrow = coil.narrow(mm, 1, 0, 67)
    contiguous = coil.contiguous(narrow)
    return (contiguous,)
)");
  expect_padding_keeps_results(cast_of_transpose);
}

// x w^T with x and w of the given types ("f32[64, 64][64, 1]cpu").
std::string head(const std::string& x, const std::string& w) {
  return "def forward(self, x: \"" + x + "\", w: \"" + w +
         "\"):\n"
         "    wt = coil.permute(w, [1, 0])\n"
         "    m = coil.mm(x, wt)\n"
         "    return (m,)\n";
}

TEST(PadProducts, LeavesAlignedSmallAndUnpaddedProductsAlone) {
  expect_no_change(pad_to_8, head("f32[64, 64][64, 1]cpu", "f32[72, 64][64, 1]cpu"));
  expect_no_change(pad_to_8, head("f32[8, 64][64, 1]cpu", "f32[67, 64][64, 1]cpu"));
  // The CPU's heuristics pad nothing; the same graph padded computes the same values in bf16.
  const std::string odd = head("bf16[64, 64][64, 1]cpu", "bf16[67, 64][64, 1]cpu");
  expect_no_change(run_pad_products, odd);
  expect_padding_keeps_results(odd);
}

}  // namespace
