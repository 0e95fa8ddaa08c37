// Every op of the registry through the inductor backend, against the eager interpreter. All
// examples go into one graph, so the whole registry costs one C++ compile; the graph is also
// a stress test of fusion, since dozens of unrelated computations share iteration spaces.
#include "compile/compile_fx.h"
#include "graph/interpreter.h"
#include "graph/op_examples.h"

using namespace coil;
using namespace coil::testing;

namespace {

struct Combined {
  std::shared_ptr<const Graph> graph;
  std::vector<std::string> labels;  // the op behind each output
  std::vector<bool> random;
};

Combined every_example() {
  Graph g;
  Combined c;
  std::vector<Node*> results;
  for (const OpExample& ex : op_examples()) {
    for (Node* r : add_example(g, ex)) {
      results.push_back(r);
      c.labels.push_back(ex.op);
      c.random.push_back(ex.random);
    }
  }
  g.output(results);
  c.graph = std::make_shared<const Graph>(std::move(g));
  return c;
}

void expect_equal(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.dtype(), want.dtype());
  Tol tol = tol_for(want.dtype());
  if (!is_floating(want.dtype())) tol = {0, 0};
  expect_close(got, values(want), want.sizes(), tol.rtol, tol.atol);
}

}  // namespace

TEST(InductorOps, EveryOpMatchesEager) {
  Combined c = every_example();
  std::map<std::string, Tensor> values = example_values();
  std::vector<Tensor> inputs;
  for (const Node* p : c.graph->placeholders()) inputs.push_back(values.at(p->name()));
  capture::CompiledGraph cg = compile_fx(c.graph, CompileOptions{}, "every_op");
  std::vector<Tensor> got = cg.run(inputs);
  std::vector<Tensor> want = interpret(*c.graph, inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(c.labels[i] + " (output " + std::to_string(i) + ")");
    EXPECT_EQ(got[i].sizes(), want[i].sizes());
    EXPECT_EQ(got[i].dtype(), want[i].dtype());
    if (!c.random[i]) expect_equal(got[i], want[i]);
  }
}
