// Helpers for pass tests: graphs as text in and text out, and a numeric check that a rewrite
// computes what the graph computed before, on random inputs.
#pragma once

#include <string>
#include <vector>

#include "graph/interpreter.h"
#include "graph/parser.h"
#include "graph/printer.h"
#include "passes/passes.h"
#include "runtime/tensor_impl.h"
#include "testing.h"

namespace coil::testing {

using PassFn = bool (*)(Graph&);

// The text print_graph writes for `text`: expected graphs may leave call annotations out.
inline std::string canonical(const std::string& text) { return print_graph(parse_graph(text)); }

// Random values of each placeholder's dtype, sizes and strides.
inline std::vector<Tensor> random_inputs(const Graph& g) {
  std::vector<Tensor> inputs;
  for (const Node* p : g.placeholders()) {
    const TensorMeta& m = p->tensor_meta();
    Tensor t = empty_from_meta(m);
    t.copy_(random(m.sizes, m.dtype));
    inputs.push_back(t);
  }
  return inputs;
}

// `after` computes what `before` computes on `inputs`: the same dtypes and sizes, values within
// the dtype's tolerance (NaN where NaN), and no result that shares an input's storage unless
// it did before.
inline void expect_same_results(const Graph& before, const Graph& after,
                                const std::vector<Tensor>& inputs) {
  std::vector<Tensor> want = interpret(before, inputs), got = interpret(after, inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE("result " + std::to_string(i));
    ASSERT_EQ(got[i].dtype(), want[i].dtype());
    Tol tol = tol_for(want[i].dtype());
    expect_close(got[i], values(want[i]), want[i].sizes(), tol.rtol, tol.atol);
    for (size_t k = 0; k < inputs.size(); ++k)
      EXPECT_FALSE(got[i].shares_storage(inputs[k]) && !want[i].shares_storage(inputs[k]))
          << "the result now aliases input " << k;
  }
}

// Runs `pass` on `before`; expects it to report a change, the graph to verify and, once DCE has
// swept what the rewrite left unused, to print as `after`; and the results to stay the same
// on random inputs.
inline void expect_pass(PassFn pass, const std::string& before, const std::string& after) {
  Graph original = parse_graph(before);
  Graph g = parse_graph(before);
  EXPECT_TRUE(pass(g)) << "the pass reported no change";
  verify(g);
  run_dce(g);
  EXPECT_EQ(print_graph(g), canonical(after));
  expect_same_results(original, g, random_inputs(original));
}

// Runs `pass` on `text`; expects it to report no change and to leave the graph as it was.
inline void expect_no_change(PassFn pass, const std::string& text) {
  Graph g = parse_graph(text);
  std::string printed = print_graph(g);
  EXPECT_FALSE(pass(g)) << "the pass reported a change";
  EXPECT_EQ(print_graph(g), printed);
}

}  // namespace coil::testing
