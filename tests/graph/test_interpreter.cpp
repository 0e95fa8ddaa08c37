// The interpreter: every op's graph gives what run_eager gives directly (and the meta the node
// promised); inputs are bound by placeholder order and checked; parameters and constants feed
// their tensors.
#include <cmath>
#include <iostream>
#include <set>

#include "graph/interpreter.h"
#include "graph/parser.h"
#include "graph/printer.h"
#include "op_examples.h"

using namespace coil;
using namespace coil::testing;

namespace {

// Same dtype, sizes and values, NaN matching NaN.
void expect_same(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.sizes(), want.sizes());
  std::vector<double> a = got.to_vector_double(), b = want.to_vector_double();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(b[i])) {
      EXPECT_TRUE(std::isnan(a[i])) << "at " << i;
    } else {
      EXPECT_EQ(a[i], b[i]) << "at " << i;
    }
  }
}

// The example's call run directly with run_eager on `values`.
std::vector<Tensor> direct(const OpExample& ex, const std::map<std::string, Tensor>& values) {
  std::vector<Arg> args = example_args(ex, values);
  OpId op = *find_op(ex.op);
  normalize_args(op, args);
  return run_eager(op, args);
}

TEST(Interpreter, EveryOpMatchesRunEager) {
  std::map<std::string, Tensor> values = example_values();
  std::set<std::string> pending;
  int done = 0;
  for (const OpExample& ex : op_examples()) {
    SCOPED_TRACE(ex.op);
    Graph g;
    std::vector<Tensor> want;
    try {
      g = example_graph(ex);
      want = direct(ex, values);
    } catch (const Error& e) {
      if (!is_pending(e)) throw;
      pending.insert(ex.op);
      continue;
    }
    std::vector<Tensor> inputs;
    for (const Node* p : g.placeholders()) inputs.push_back(values.at(p->name()));
    std::vector<Tensor> got = interpret(g, inputs);
    const std::vector<Node*>& results = g.output_node()->results();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      // The node's meta is what eager produced (the inputs have the placeholders' layout).
      EXPECT_EQ(meta_of(got[i]), results[i]->tensor_meta())
          << "output " << i << ": eager gave " << meta_str(meta_of(got[i]));
      if (!ex.random) expect_same(got[i], want[i]);
    }
    ++done;
  }
  EXPECT_GT(done, 100);
  for (const auto& op : pending) std::cout << "[ pending  ] " << op << ": not implemented yet\n";
}

// A small program against a float64 reference written as plain loops.
TEST(Interpreter, ComputesAProgram) {
  Graph g = parse_graph(
      R"(def forward(self, x: "f64[3, 5][5, 1]cpu", y: "f64[5][1]cpu"):
    w: "f64[5][1]cpu" = coil.parameter("w")
    c: "f64[1][1]cpu" = coil.constant([0.5])
    a = coil.mul(x, w)
    b = coil.add(a, y)
    s = coil.sin(b)
    parts = coil.split(s, 2, 1)
    p2 = parts[2]
    t = coil.sub(p2, c)
    return (s, t, w)
)",
      {{"w", random({5}, kFloat64)}});
  Tensor x = random({3, 5}, kFloat64), y = random({5}, kFloat64);
  Tensor w = g.find("w")->value();
  std::vector<Tensor> out = interpret(g, {noncontiguous(x), y});
  ASSERT_EQ(out.size(), 3u);
  std::vector<double> xv = values(x), yv = values(y), wv = values(w), s, t;
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 5; ++j) s.push_back(std::sin(xv[i * 5 + j] * wv[j] + yv[j]));
    t.push_back(s.back() - 0.5);  // column 4 is the third part of a split by 2
  }
  expect_close(out[0], s, {3, 5}, 1e-12, 1e-12);
  expect_close(out[1], t, {3, 1}, 1e-12, 1e-12);
  EXPECT_TRUE(out[2].is_same(w));  // a returned parameter is the tensor itself
}

TEST(Interpreter, ChecksItsInputs) {
  Graph g;
  Node* x = g.placeholder("x", ops::contiguous_meta(kFloat32, {2, 3}));
  g.output({g.call(OpId::neg, {x})});
  EXPECT_COIL_ERROR(interpret(g, {}), "the graph takes 1 inputs (x) but got 0");
  EXPECT_COIL_ERROR(interpret(g, {zeros({3, 2})}), "input 0 ('x') must be f32[2, 3]");
  EXPECT_COIL_ERROR(interpret(g, {zeros({2, 3}, kFloat64)}), "but got f64[2, 3]");
  EXPECT_COIL_ERROR(interpret(g, {Tensor()}), "undefined tensor");
  EXPECT_COIL_ERROR(interpret(g, {meta_tensor(ops::contiguous_meta(kFloat32, {2, 3}))}),
                    "has no data");
  // Any strides do.
  Tensor xt = random({3, 2}).t();
  expect_same(interpret(g, {xt})[0], neg(xt));
  Graph no_output;
  no_output.placeholder("x", ops::contiguous_meta(kFloat32, {2}));
  EXPECT_COIL_ERROR(interpret(no_output, {zeros({2})}), "no output node");
}

TEST(Interpreter, UnboundParametersAreAnError) {
  Graph g = parse_graph(
      R"(def forward(self):
    w: "f32[2][1]cpu" = coil.parameter("fc.w")
    return (w,)
)");
  EXPECT_COIL_ERROR(interpret(g, {}), "parameter 'w' (\"fc.w\") has no data");
}

TEST(Interpreter, SameInputTwiceAndUnusedInputs) {
  Graph g;
  Node* x = g.placeholder("x", ops::contiguous_meta(kInt32, {4}));
  g.placeholder("unused", ops::contiguous_meta(kFloat32, {1}));
  Node* m = g.call(OpId::mul, {x, x});
  g.output({m, x, m});
  Tensor xv = arange(-2, 2, 1, kInt32);
  std::vector<Tensor> out = interpret(g, {xv, zeros({1})});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(values(out[0]), (std::vector<double>{4, 1, 0, 1}));
  EXPECT_TRUE(out[1].is_same(xv));
  EXPECT_TRUE(out[2].is_same(out[0]));
}

}  // namespace
