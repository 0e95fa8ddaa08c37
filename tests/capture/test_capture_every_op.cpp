// Every op of the registry through coil::compile's public path: captured on proxies, then the
// passes and decompositions ("aot_eager": no C++ compile, so the whole registry costs under a
// second), compared with eager on the same inputs. The inductor backend's own every-op test
// is tests/inductor/test_every_op.cpp.
#include "graph/op_examples.h"

using namespace coil;
using namespace coil::testing;

namespace {

// The example's arguments, with tensors taken from `inputs` in order of appearance.
std::vector<Arg> example_args(const OpExample& ex, const std::vector<Tensor>& inputs) {
  std::vector<Arg> args;
  size_t next = 0;
  for (const ExampleArg& a : ex.args) {
    if (std::holds_alternative<In>(a)) args.emplace_back(inputs.at(next++));
    if (auto* l = std::get_if<Ins>(&a)) {
      std::vector<Tensor> ts;
      for (size_t i = 0; i < l->names.size(); ++i) ts.push_back(inputs.at(next++));
      args.emplace_back(std::move(ts));
    }
    if (auto* v = std::get_if<Arg>(&a)) args.push_back(*v);
  }
  return args;
}

std::vector<Tensor> example_inputs_of(const OpExample& ex,
                                      const std::map<std::string, Tensor>& values) {
  std::vector<Tensor> out;
  for (const ExampleArg& a : ex.args) {
    if (auto* i = std::get_if<In>(&a)) out.push_back(values.at(i->name));
    if (auto* l = std::get_if<Ins>(&a))
      for (const char* name : l->names) out.push_back(values.at(name));
  }
  return out;
}

}  // namespace

TEST(CaptureEveryOp, MatchesEagerThroughCompile) {
  compiler_reset();
  std::map<std::string, Tensor> values = example_values();
  int compiled = 0;
  for (const OpExample& ex : op_examples()) {
    SCOPED_TRACE(ex.op);
    OpId op = *find_op(ex.op);
    auto fn = [&ex, op](const std::vector<Tensor>& in) {
      return call_op(op, example_args(ex, in));
    };
    auto cf = compile(fn, {.backend = "aot_eager", .name = ex.op});
    std::vector<Tensor> in = example_inputs_of(ex, values);
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
