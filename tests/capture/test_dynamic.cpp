// Dynamic shapes through coil::compile: dynamic=true, automatic dynamic after a size-caused
// recompile, mark_dynamic / mark_static, sizes the program reads, guards on relations, and the
// errors of bad input. Every result is checked against eager.

#include "testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

class DynamicShapes : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("COIL_DISABLE");
    compiler_reset();
  }
  int64_t count(const char* name) { return counters()[name]; }
};

void expect_same(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.sizes(), want.sizes());
  expect_close(got, values(want), want.sizes(), 1e-5, 1e-5);
}

Tensor row_softmax(const Tensor& x, const Tensor& b) { return softmax(x + b, 1); }

}  // namespace

TEST_F(DynamicShapes, DynamicTrueCompilesOnceForEverySize) {
  auto cf = compile(row_softmax, {.dynamic = true});
  for (auto [rows, cols] : {std::pair{8, 16}, {5, 33}, {12, 7}, {64, 300}, {2, 2}}) {
    Tensor x = random({rows, cols}), b = random({cols});
    expect_same(cf(x, b), row_softmax(x, b));
  }
  EXPECT_EQ(count("captures"), 1);
  EXPECT_EQ(count("guard_hits"), 4);
}

TEST_F(DynamicShapes, AutomaticDynamicAfterOneSizeRecompile) {
  auto f = [](const Tensor& x) { return relu(x).sum({1}) * 2; };
  auto cf = compile(f);
  for (int64_t rows : {8, 9, 10, 30, 1000, 3}) {
    Tensor x = random({rows, 16});
    expect_same(cf(x), f(x));
  }
  EXPECT_EQ(count("captures"), 2);  // static for 8, then one graph over s0 for the rest
  EXPECT_EQ(count("recompiles"), 1);
  Tensor wider = random({10, 17});  // dim 1 was never seen changing: static, so a recompile
  expect_same(cf(wider), f(wider));
  EXPECT_EQ(count("captures"), 3);
}

TEST_F(DynamicShapes, DynamicFalseRecompilesPerSize) {
  auto f = [](const Tensor& x) { return x * 3; };
  auto cf = compile(f, {.dynamic = false});
  for (int64_t n : {8, 9, 10}) cf(random({n}));
  EXPECT_EQ(count("captures"), 3);
}

TEST_F(DynamicShapes, SizesTheProgramReadsAreSpecialised) {
  // x.size(0) leaves the ops as a number: the graph holds only for that value.
  auto f = [](const Tensor& x) { return x * static_cast<double>(x.size(0)); };
  auto cf = compile(f, {.dynamic = true});
  for (int64_t n : {8, 9, 8, 9}) {
    Tensor x = random({n, 4});
    expect_same(cf(x), f(x));
  }
  EXPECT_EQ(count("captures"), 2);
}

TEST_F(DynamicShapes, SizesZeroAndOneAreSpecialised) {
  auto f = [](const Tensor& x) { return x.exp(); };
  auto cf = compile(f, {.dynamic = true});
  cf(random({1, 16}));
  cf(random({1, 20}));  // dim 1 symbolic
  EXPECT_EQ(count("captures"), 1);
  cf(random({2, 20}));  // dim 0 was 1: specialised
  EXPECT_EQ(count("captures"), 2);
}

TEST_F(DynamicShapes, MarkDynamicAndMarkStatic) {
  auto f = [](const Tensor& x) { return x.sum({0}); };
  auto cf = compile(f);
  Tensor a = random({6, 5});
  mark_dynamic(a, 0);
  expect_same(cf(a), f(a));
  Tensor b = random({7, 5});
  expect_same(cf(b), f(b));  // the graph over s0 serves it: no recompile
  EXPECT_EQ(count("captures"), 1);

  compiler_reset();
  auto cg = compile(f, {.dynamic = true});
  Tensor c = random({6, 5});
  mark_static(c, 0);
  cg(c);
  cg(random({6, 9}));  // dim 1 symbolic
  EXPECT_EQ(count("captures"), 1);
  cg(random({7, 9}));  // dim 0 of the first input was static
  EXPECT_EQ(count("captures"), 2);

  EXPECT_COIL_ERROR(mark_dynamic(random({1, 3}), 0), "sizes 0 and 1 are always specialised");
  EXPECT_COIL_ERROR(mark_dynamic(random({2, 3}), 2), "out of range");
}

TEST_F(DynamicShapes, RelationsAreGuardedAndMistakesAreErrors) {
  auto f = [](const Tensor& x, const Tensor& y) { return x + y; };
  auto cf = compile(f, {.dynamic = true});
  Tensor x = random({8}), y = random({8});
  expect_same(cf(x, y), f(x, y));
  Tensor x9 = random({9}), y9 = random({9});
  expect_same(cf(x9, y9), f(x9, y9));
  EXPECT_EQ(count("captures"), 1);  // s1 == s0 holds
  Tensor y1 = random({1});
  expect_same(cf(x9, y1), f(x9, y1));  // broadcasting a 1: another graph
  EXPECT_EQ(count("captures"), 2);
  EXPECT_COIL_ERROR(cf(random({9}), random({10})), "add");  // the user's mistake, as eager says
}

TEST_F(DynamicShapes, NonDenseInputsStayStatic) {
  auto f = [](const Tensor& x) { return x * 2; };
  auto cf = compile(f, {.dynamic = true});
  Tensor base = random({8, 8});
  Tensor strided = base.slice(1, 0, std::nullopt, 2);  // strides [8, 2]
  expect_same(cf(strided), f(strided));
  Tensor other = random({9, 8}).slice(1, 0, std::nullopt, 2);
  expect_same(cf(other), f(other));
  EXPECT_EQ(count("captures"), 2);
}

TEST_F(DynamicShapes, ViewsAndReductionsOverSymbols) {
  auto f = [](const Tensor& x, const Tensor& w) {
    Tensor h = matmul(x, w).relu();
    return std::make_tuple(h.flatten(), layer_norm(h, {h.size(-1)}), h.transpose(0, 1).sum({1}));
  };
  auto cf = compile(f, {.dynamic = true});
  for (int64_t n : {8, 13, 40}) {
    Tensor x = random({n, 12}), w = random({12, 6});
    auto [a, b, c] = cf(x, w);
    auto [ea, eb, ec] = f(x, w);
    expect_same(a, ea);
    expect_same(b, eb);
    expect_same(c, ec);
  }
  EXPECT_EQ(count("captures"), 1);
}

TEST_F(DynamicShapes, LogsShowSymbolsGuardsAndSpecialisations) {
  const std::string text = log_of("dynamic,guards,recompiles", [] {
    auto f = [](const Tensor& x, const Tensor& y) {
      return x * static_cast<double>(y.size(0)) + y;
    };
    auto cf = compile(f, {.arg_names = {"x", "y"}});
    cf(random({4, 8}), random({8}));
    cf(random({4, 9}), random({9}));  // automatic dynamic
  });
  EXPECT_NE(text.find("automatic dynamic: tensor input 0 dim 1"), std::string::npos) << text;
  EXPECT_NE(text.find("created s0 = 9 for x.size(1)"), std::string::npos) << text;
  EXPECT_NE(text.find("y.size(0) read by the program as a number"), std::string::npos) << text;
  EXPECT_NE(text.find("s0 = x.size(1)"), std::string::npos) << text;
}
