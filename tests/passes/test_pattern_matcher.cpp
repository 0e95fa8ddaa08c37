// The pattern matcher on patterns of its own (wildcards, repeated names, commutative matching,
// predicates, fixpoint), then the post-grad patterns and the addmm_relu kernel they target.
#include "pass_testing.h"
#include "passes/pattern_matcher.h"

using namespace coil;
using namespace coil::testing;

namespace {

const char* kHead = "def forward(self, x: \"f32[4, 6][6, 1]cpu\", y: \"f32[4, 6][6, 1]cpu\"):\n";

// mul(x, x) -> pow(x, 2): `x` twice must bind one node.
Pattern square() {
  Pattern p;
  p.name = "mul(x, x) -> pow(x, 2)";
  p.expr = op(OpId::mul, {any("x"), any("x")});
  p.replacement = [](Graph& g, const Match& m) {
    return g.call(OpId::pow, {m["x"], Scalar(2)}, m.root);
  };
  return p;
}

// add(sin(a), b) -> sub(b, neg(sin(a))) (a replacement of several nodes), optionally either
// way round.
Pattern add_of_sin(bool commutative) {
  Pattern p;
  p.name = "add(sin(a), b) -> sub(b, neg(sin(a)))";
  p.expr = op(OpId::add, {op(OpId::sin, {any("a")}, "sin"), any("b")});
  p.commutative = commutative;
  p.replacement = [](Graph& g, const Match& m) {
    Node* neg = g.call(OpId::neg, {m["sin"]}, m.root);
    return g.call(OpId::sub, {m["b"], neg}, m.root);
  };
  return p;
}

std::string rewrite(const std::string& text, const std::vector<Pattern>& patterns,
                    bool expect_change = true) {
  Graph g = parse_graph(text);
  EXPECT_EQ(apply_patterns(g, patterns), expect_change);
  verify(g);
  return print_graph(g);
}

TEST(PatternMatcher, RepeatedWildcardsBindOneNode) {
  EXPECT_EQ(rewrite(std::string(kHead) + "    a = coil.mul(x, x)\n"
                                         "    b = coil.mul(x, y)\n"
                                         "    return (a, b)\n",
                    {square()}),
            canonical(std::string(kHead) + "    pow_1 = coil.pow(x, 2)\n"
                                           "    b = coil.mul(x, y)\n"
                                           "    return (pow_1, b)\n"));
}

TEST(PatternMatcher, CommutativeMatchingIsOptIn) {
  std::string text = std::string(kHead) +
                     "    s = coil.sin(x)\n"
                     "    a = coil.add(y, s)\n"
                     "    return (a,)\n";
  rewrite(text, {add_of_sin(false)}, false);
  EXPECT_EQ(rewrite(text, {add_of_sin(true)}),
            canonical(std::string(kHead) + "    s = coil.sin(x)\n"
                                           "    neg = coil.neg(s)\n"
                                           "    sub = coil.sub(y, neg)\n"
                                           "    return (sub,)\n"));
}

// Nested commutative ops: the first order that binds the outer operands may fail deeper down,
// and the bindings it made must not leak into the other order.
TEST(PatternMatcher, CommutativeMatchingBacktracks) {
  Pattern p;
  p.name = "mul(add(a, b), a)";
  p.expr = op(OpId::mul, {op(OpId::add, {any("a"), any("b")}), any("a")});
  p.commutative = true;
  p.replacement = [](Graph& g, const Match& m) {
    return g.call(OpId::atan2, {m["a"], m["b"]}, m.root);
  };
  EXPECT_EQ(rewrite(std::string(kHead) + "    s = coil.add(x, y)\n"
                                         "    m = coil.mul(y, s)\n"
                                         "    return (m,)\n",
                    {p}),
            canonical(std::string(kHead) + "    atan2 = coil.atan2(y, x)\n"
                                           "    return (atan2,)\n"));
}

TEST(PatternMatcher, PredicateDecides) {
  Pattern p = add_of_sin(false);
  p.predicate = [](const Match& m) { return m["b"]->kind() == NodeKind::Placeholder; };
  EXPECT_EQ(rewrite(std::string(kHead) + "    s = coil.sin(x)\n"
                                         "    c = coil.cos(x)\n"
                                         "    a = coil.add(s, c)\n"
                                         "    b = coil.add(s, y)\n"
                                         "    return (a, b)\n",
                    {p}),
            canonical(std::string(kHead) + "    s = coil.sin(x)\n"
                                           "    c = coil.cos(x)\n"
                                           "    a = coil.add(s, c)\n"
                                           "    neg = coil.neg(s)\n"
                                           "    sub = coil.sub(y, neg)\n"
                                           "    return (a, sub)\n"));
}

// One pattern's rewrite creates another's match: applied until nothing matches.
TEST(PatternMatcher, AppliesPatternsUntilFixpoint) {
  Pattern neg_to_mul;
  neg_to_mul.name = "neg(x) -> mul(x, x)";
  neg_to_mul.expr = op(OpId::neg, {any("x")});
  neg_to_mul.replacement = [](Graph& g, const Match& m) {
    return g.call(OpId::mul, {m["x"], m["x"]}, m.root);
  };
  EXPECT_EQ(rewrite(std::string(kHead) + "    n = coil.neg(x)\n"
                                         "    return (n,)\n",
                    {square(), neg_to_mul}),
            canonical(std::string(kHead) + "    pow_1 = coil.pow(x, 2)\n"
                                           "    return (pow_1,)\n"));
}

TEST(PatternMatcher, PatternsThatNeverSettleAreABug) {
  Pattern flip;
  flip.name = "add(a, b) -> add(b, a)";
  flip.expr = op(OpId::add, {any("a"), any("b")});
  flip.replacement = [](Graph& g, const Match& m) {
    return g.call(OpId::add, {m["b"], m["a"]}, m.root);
  };
  Graph g = parse_graph(std::string(kHead) + "    a = coil.add(x, y)\n    return (a,)\n");
  EXPECT_THROW(apply_patterns(g, {flip}), InternalError);
}

// ---- the post-grad patterns ------------------------------------------------------------------

const char* kMatmul =
    "def forward(self, a: \"f32[4, 6][6, 1]cpu\", b: \"f32[6, 5][5, 1]cpu\", "
    "bias: \"f32[5][1]cpu\"):\n";

TEST(PostGradPatterns, AddOfMmBecomesAddmmEitherWayRound) {
  expect_pass(run_post_grad_patterns,
              std::string(kMatmul) +
                  "    m = coil.mm(a, b)\n"
                  "    s = coil.add(m, bias)\n"
                  "    m2 = coil.mm(a, b)\n"
                  "    s2 = coil.add(bias, m2)\n"
                  "    return (s, s2)\n",
              std::string(kMatmul) +
                  "    addmm = coil.addmm(bias, a, b)\n"
                  "    addmm_1 = coil.addmm(bias, a, b)\n"
                  "    return (addmm, addmm_1)\n");
}

TEST(PostGradPatterns, ReluOfAddmmBecomesAddmmRelu) {
  expect_pass(run_post_grad_patterns,
              std::string(kMatmul) +
                  "    m = coil.mm(a, b)\n"
                  "    s = coil.add(m, bias)\n"
                  "    r = coil.relu(s)\n"
                  "    return (r,)\n",
              std::string(kMatmul) +
                  "    addmm_relu = coil.addmm_relu(bias, a, b)\n"
                  "    return (addmm_relu,)\n");
}

// A bias that broadcasts along the rows (a column) fits addmm too.
TEST(PostGradPatterns, AddOfAColumnBecomesAddmm) {
  expect_pass(run_post_grad_patterns,
              std::string(kMatmul) +
                  "    col: \"f32[4, 1][1, 1]cpu\" = coil.constant([1.0, 2.0, 3.0, 4.0])\n"
                  "    m = coil.mm(a, b)\n"
                  "    s = coil.add(col, m)\n"
                  "    return (s,)\n",
              std::string(kMatmul) +
                  "    col: \"f32[4, 1][1, 1]cpu\" = coil.constant([1.0, 2.0, 3.0, 4.0])\n"
                  "    addmm = coil.addmm(col, a, b)\n"
                  "    return (addmm,)\n");
}

// The first way round binds an mm the predicate rejects (it has another user): the matcher
// backtracks and fuses the other one.
TEST(PostGradPatterns, PredicateRejectionTriesTheOtherOperand) {
  expect_pass(run_post_grad_patterns,
              std::string(kMatmul) +
                  "    m1 = coil.mm(a, b)\n"
                  "    m2 = coil.mm(a, b)\n"
                  "    s = coil.add(m1, m2)\n"
                  "    return (s, m1)\n",
              std::string(kMatmul) +
                  "    m1 = coil.mm(a, b)\n"
                  "    addmm = coil.addmm(m1, a, b)\n"
                  "    return (addmm, m1)\n");
}

TEST(PostGradPatterns, KeepAddsThatDoNotFitAddmm) {
  expect_no_change(
      run_post_grad_patterns,
      R"(def forward(self, a: "f32[4, 6][6, 1]cpu", b: "f32[6, 5][5, 1]cpu", b3: "f32[2, 4, 5][20, 5, 1]cpu", b64: "f64[5][1]cpu", bias: "f32[5][1]cpu"):
    m1 = coil.mm(a, b)
    s1 = coil.add(m1, b3)
)"  // grows the product to [2, 4, 5]
      "    m2 = coil.mm(a, b)\n"
      "    s2 = coil.add(m2, b64)\n"  // promotes it to float64
      "    m3 = coil.mm(a, b)\n"
      "    s3 = coil.add(m3, 2.0)\n"  // a number, not a tensor
      "    m4 = coil.mm(a, b)\n"
      "    s4 = coil.add(m4, bias)\n"
      "    return (s1, s2, s3, s4, m4)\n");  // m4 is needed on its own
}

TEST(PostGradPatterns, KeepReluOfAnAddmmUsedElsewhere) {
  expect_no_change(run_post_grad_patterns, std::string(kMatmul) +
                                               "    m = coil.addmm(bias, a, b)\n"
                                               "    r = coil.relu(m)\n"
                                               "    return (r, m)\n");
}

// A product read only transposed is computed transposed, from its operands' transposes (a tied
// weight's gradient): written in the order its reader reads it.
TEST(PostGradPatterns, TransposedProductIsAProductOfTransposes) {
  expect_pass(run_post_grad_patterns,
              std::string(kMatmul) +
                  "    m = coil.mm(a, b)\n"
                  "    t = coil.permute(m, [1, 0])\n"
                  "    s = coil.sin(t)\n"
                  "    return (s,)\n",
              std::string(kMatmul) +
                  "    permute = coil.permute(b, [1, 0])\n"
                  "    permute_1 = coil.permute(a, [1, 0])\n"
                  "    mm = coil.mm(permute, permute_1)\n"
                  "    s = coil.sin(mm)\n"
                  "    return (s,)\n");
}

// Not when the transpose is a result (its strides are eager's), the product is read as it is, or
// the permute keeps the dims in place (written with negative dims).
TEST(PostGradPatterns, KeepTransposesOfProductsReadOtherwise) {
  expect_no_change(run_post_grad_patterns, std::string(kMatmul) +
                                               "    m = coil.mm(a, b)\n"
                                               "    t = coil.permute(m, [-2, -1])\n"
                                               "    s = coil.sin(t)\n"
                                               "    return (s,)\n");
  expect_no_change(run_post_grad_patterns, std::string(kMatmul) +
                                               "    m = coil.mm(a, b)\n"
                                               "    t = coil.permute(m, [1, 0])\n"
                                               "    return (t,)\n");
  expect_no_change(run_post_grad_patterns, std::string(kMatmul) +
                                               "    m = coil.mm(a, b)\n"
                                               "    t = coil.permute(m, [1, 0])\n"
                                               "    s = coil.sin(t)\n"
                                               "    return (s, m)\n");
}

// ---- addmm_relu, the kernel ------------------------------------------------------------------

// addmm_relu equals relu(addmm(...)) bit for bit: the same product, then relu in place.
void expect_addmm_relu_matches(const Tensor& bias, const Tensor& a, const Tensor& b) {
  Tensor want = run_eager(OpId::relu, {run_eager(OpId::addmm, {bias, a, b}).at(0)}).at(0);
  Tensor got = run_eager(OpId::addmm_relu, {bias, a, b}).at(0);
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.sizes(), want.sizes());
  std::vector<double> w = values(want), g = values(got);
  for (size_t i = 0; i < w.size(); ++i) {
    if (std::isnan(w[i])) {
      ASSERT_TRUE(std::isnan(g[i])) << "at " << i;
      continue;
    }
    ASSERT_EQ(g[i], w[i]) << "at " << i;
    ASSERT_EQ(std::signbit(g[i]), std::signbit(w[i])) << "at " << i;
  }
}

TEST(AddmmRelu, MatchesAddmmThenRelu) {
  for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32}) {
    SCOPED_TRACE(dtype_name(t));
    Tensor bias = random({5}, t), a = random({4, 7}, t), b = random({7, 5}, t);
    expect_addmm_relu_matches(bias, a, b);
    expect_addmm_relu_matches(noncontiguous(random({4, 5}, t)), noncontiguous(a), b);
    expect_addmm_relu_matches(random({4, 1}, t), a, noncontiguous(b));
  }
}

TEST(AddmmRelu, LargeResultsAndSpecialValues) {
  // Above the parallel threshold, so the relu pass is split among threads.
  expect_addmm_relu_matches(random({300}), random({512, 8}), random({8, 300}));
  Tensor bias = tensor(std::vector<float>{NAN, -INFINITY, INFINITY, -0.0f});
  expect_addmm_relu_matches(bias, zeros({3, 2}), zeros({2, 4}));
  expect_addmm_relu_matches(bias, zeros({0, 2}), zeros({2, 4}));
}

TEST(AddmmRelu, RejectsWhatAddmmRejects) {
  EXPECT_COIL_ERROR(run_eager(OpId::addmm_relu, {ones({3, 3}), ones({2, 4}), ones({4, 2})}),
                    "cannot broadcast");
  EXPECT_COIL_ERROR(run_eager(OpId::addmm_relu, {ones({2}), ones({2, 4}), ones({3, 2})}),
                    "inner sizes 4 and 3");
}

}  // namespace

// The gradient of a gather (cross-entropy's one-hot targets): a scatter into zeros becomes a
// comparison with the positions, which fuses into its readers; other scatters stay.
TEST(PostGradPatterns, ScatterIntoZerosBecomesAComparison) {
  const std::string head =
      "def forward(self, i: \"i64[4, 1][1, 1]cpu\", v: \"f32[4, 1][1, 1]cpu\", "
      "w: \"f32[4, 6][6, 1]cpu\"):\n";
  const std::string before = head +
                             "    z = coil.full([4, 6], 0, coil.float32, \"cpu\")\n"
                             "    s = coil.scatter_add(z, 1, i, v)\n"
                             "    return (s,)\n";
  Graph original = parse_graph(before), g = parse_graph(before);
  EXPECT_TRUE(run_post_grad_patterns(g));
  verify(g);
  run_dce(g);
  EXPECT_EQ(print_graph(g),
            canonical(head + "    arange = coil.arange(0, 6, 1, coil.int64, \"cpu\")\n"
                             "    view = coil.view(arange, [1, 6])\n"
                             "    eq = coil.eq(view, i)\n"
                             "    where = coil.where(eq, v, 0)\n"
                             "    return (where,)\n"));
  Tensor index = tensor(std::vector<int64_t>{5, 0, 2, 5}, Shape{4, 1});
  expect_same_results(original, g, {index, random({4, 1}), random({4, 6})});
  // A base that is not zeros, or several indices per line, is a real scatter.
  expect_no_change(run_post_grad_patterns, head +
                                               "    s = coil.scatter_add(w, 1, i, v)\n"
                                               "    return (s,)\n");
  expect_no_change(run_post_grad_patterns,
                   "def forward(self, i: \"i64[4, 2][2, 1]cpu\", v: \"f32[4, 2][2, 1]cpu\"):\n"
                   "    z = coil.full([4, 6], 0, coil.float32, \"cpu\")\n"
                   "    s = coil.scatter_add(z, 1, i, v)\n"
                   "    return (s,)\n");
}
