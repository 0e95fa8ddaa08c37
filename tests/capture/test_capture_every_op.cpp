// Every op of the registry through coil::compile's public path: captured on proxies, then the
// passes and decompositions ("aot_eager": no C++ compile, so the whole registry costs under a
// second), compared with eager on the same inputs. The inductor backend's own every-op test
// is tests/inductor/test_every_op.cpp.
#include "graph/op_examples.h"

using namespace coil;
using namespace coil::testing;

TEST(CaptureEveryOp, MatchesEagerThroughCompile) {
  compiler_reset();
  std::map<std::string, Tensor> values = example_values();
  int compiled = 0;
  for (const OpExample& ex : op_examples()) {
    SCOPED_TRACE(ex.op);
    OpId op = *find_op(ex.op);
    std::vector<std::string> names = example_input_names(ex);
    auto fn = [&ex, op, names](const std::vector<Tensor>& in) {
      std::map<std::string, Tensor> bound;
      for (size_t i = 0; i < names.size(); ++i) bound[names[i]] = in[i];
      return call_op(op, example_args(ex, bound));
    };
    auto cf = compile(fn, {.backend = "aot_eager", .name = ex.op});
    std::vector<Tensor> in;
    for (const std::string& name : names) in.push_back(values.at(name));
    std::vector<Tensor> got = cf(in), want = fn(in);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].sizes(), want[i].sizes());
      EXPECT_EQ(got[i].dtype(), want[i].dtype());
      Tol tol = is_floating(want[i].dtype()) ? tol_for(want[i].dtype()) : Tol{0, 0};
      if (!ex.random)
        expect_close(got[i], coil::testing::values(want[i]), want[i].sizes(), tol.rtol, tol.atol);
    }
    ++compiled;
  }
  EXPECT_EQ(counters()["captures"], compiled);
  EXPECT_EQ(counters()["graph_breaks"], 0);
}
