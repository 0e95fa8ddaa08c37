// gelu fused into a matrix product: the post-grad patterns that find gelu's decomposition over
// an addmm, and the addmm_gelu kernel they target (oneDNN's epilogue, or a pass after the
// product), checked against float64.
#include "decomp/decompose.h"
#include "pass_testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

// gelu arrives at the post-grad patterns decomposed: the pass under test is the two together,
// so a change to gelu's decomposition that the patterns no longer see fails here.
bool decompose_then_patterns(Graph& g) {
  decompose(g);
  return run_post_grad_patterns(g);
}

const char* kHead =
    "def forward(self, a: \"f32[4, 6][6, 1]cpu\", b: \"f32[6, 5][5, 1]cpu\", "
    "bias: \"f32[5][1]cpu\"):\n";

TEST(AddmmGeluPattern, GeluOfAddmmBecomesAddmmGelu) {
  expect_pass(decompose_then_patterns,
              std::string(kHead) +
                  "    m = coil.addmm(bias, a, b)\n"
                  "    g = coil.gelu(m)\n"
                  "    return (g,)\n",
              std::string(kHead) +
                  "    addmm_gelu = coil.addmm_gelu(bias, a, b)\n"
                  "    return (addmm_gelu,)\n");
}

TEST(AddmmGeluPattern, TanhGeluOfABiasedProductBecomesAddmmGelu) {
  expect_pass(decompose_then_patterns,
              std::string(kHead) +
                  "    m = coil.mm(a, b)\n"
                  "    s = coil.add(bias, m)\n"
                  "    g = coil.gelu(s, \"tanh\")\n"
                  "    return (g,)\n",
              std::string(kHead) +
                  "    addmm_gelu = coil.addmm_gelu(bias, a, b, \"tanh\")\n"
                  "    return (addmm_gelu,)\n");
}

TEST(AddmmGeluPattern, KeepsWhatItCannotFuse) {
  // The product is also a result (as when autograd saves it for the backward).
  Graph used = parse_graph(std::string(kHead) +
                           "    m = coil.addmm(bias, a, b)\n"
                           "    g = coil.gelu(m)\n"
                           "    return (g, m)\n");
  decompose(used);
  std::string printed = print_graph(used);
  EXPECT_FALSE(run_post_grad_patterns(used));
  EXPECT_EQ(print_graph(used), printed);
  // float64: oneDNN would not compute it, and the generated kernel is vectorised.
  Graph f64 = parse_graph(
      "def forward(self, a: \"f64[4, 6][6, 1]cpu\", b: \"f64[6, 5][5, 1]cpu\", "
      "bias: \"f64[5][1]cpu\"):\n"
      "    m = coil.addmm(bias, a, b)\n"
      "    g = coil.gelu(m)\n"
      "    return (g,)\n");
  decompose(f64);
  EXPECT_FALSE(run_post_grad_patterns(f64));
  // The same shape of arithmetic with other constants is not gelu.
  expect_no_change(run_post_grad_patterns, std::string(kHead) +
                                               "    m = coil.addmm(bias, a, b)\n"
                                               "    s = coil.mul(m, 0.7)\n"
                                               "    e = coil.erf(s)\n"
                                               "    h = coil.mul(m, 0.5)\n"
                                               "    p = coil.add(e, 1.0)\n"
                                               "    g = coil.mul(h, p)\n"
                                               "    return (g,)\n");
  // A tensor where the decomposition has a number.
  expect_no_change(run_post_grad_patterns, std::string(kHead) +
                                               "    m = coil.addmm(bias, a, b)\n"
                                               "    s = coil.mul(m, m)\n"
                                               "    e = coil.erf(s)\n"
                                               "    h = coil.mul(m, 0.5)\n"
                                               "    p = coil.add(e, 1.0)\n"
                                               "    g = coil.mul(h, p)\n"
                                               "    return (g,)\n");
}

// ---- addmm_gelu, the kernel -----------------------------------------------------------------

// gelu(bias + a @ b) in float64 from the operands' values.
std::vector<double> reference(const Tensor& bias, const Tensor& a, const Tensor& b,
                              const std::string& approximate) {
  Tensor sum = addmm(bias.to(kFloat64), a.to(kFloat64), b.to(kFloat64));
  return values(gelu(sum, approximate));
}

void expect_addmm_gelu_matches(const Tensor& bias, const Tensor& a, const Tensor& b) {
  for (const char* approximate : {"none", "tanh"}) {
    SCOPED_TRACE(approximate);
    Tensor got = run_eager(OpId::addmm_gelu, {bias, a, b, std::string(approximate)}).at(0);
    ASSERT_EQ(got.dtype(), a.dtype());
    Tol tol = tol_for(a.dtype());
    expect_close(got, reference(bias, a, b, approximate), {a.size(0), b.size(1)}, tol.rtol,
                 tol.atol);
  }
}

TEST(AddmmGelu, MatchesFloat64) {
  for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    SCOPED_TRACE(dtype_name(t));
    Tensor bias = random({5}, t), a = random({4, 7}, t), b = random({7, 5}, t);
    expect_addmm_gelu_matches(bias, a, b);
    expect_addmm_gelu_matches(noncontiguous(random({4, 5}, t)), noncontiguous(a), b);
    expect_addmm_gelu_matches(random({4, 1}, t), a, noncontiguous(b));
  }
}

// Products large enough for oneDNN, which computes the gelu in its kernel, with the bias as
// a row, a column and a matrix, and operands read in place through their strides.
TEST(AddmmGelu, InsideTheLibrarysKernel) {
  Tensor a = random({96, 64}), b = random({64, 80});
  expect_addmm_gelu_matches(random({80}), a, b);
  expect_addmm_gelu_matches(random({96, 1}), a, b);
  expect_addmm_gelu_matches(random({96, 80}), noncontiguous(random({96, 64})), b);
  expect_addmm_gelu_matches(random({80}), a, random({80, 64}).t());
  // Large values and zeros: gelu(x) -> x, gelu(-x) -> 0.
  expect_addmm_gelu_matches(random({80}, kFloat32, -30, 30), a, b);
  expect_addmm_gelu_matches(random({80}), zeros({96, 64}), b);
}

TEST(AddmmGelu, Errors) {
  EXPECT_COIL_ERROR(run_eager(OpId::addmm_gelu, {ones({5}, kInt64), ones({4, 3}, kInt64),
                                                 ones({3, 5}, kInt64), std::string("none")}),
                    "addmm_gelu: gelu needs floating-point operands");
  EXPECT_COIL_ERROR(
      run_eager(OpId::addmm_gelu, {ones({5}), ones({4, 3}), ones({3, 5}), std::string("fast")}),
      "approximate must be \"none\" or \"tanh\", got \"fast\"");
  EXPECT_COIL_ERROR(
      run_eager(OpId::addmm_gelu, {ones({5}), ones({4, 3}), ones({2, 5}), std::string("none")}),
      "inner sizes 3 and 2");
}

}  // namespace
