// coil::compile: lazy capture, guards and recompiles, captured tensors, in-place updates,
// graph breaks in both modes, the cache limit, options and threads.
#include <atomic>
#include <cstdlib>
#include <thread>

#include "compile/compile_settings.h"
#include "testing.h"

using namespace coil;
using namespace coil::testing;

namespace {
class CompileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("COIL_DISABLE");
    compiler_reset();
  }
  int64_t count(const char* name) { return counters()[name]; }
};

Tensor sin2cos2(const Tensor& x) { return sin(x).pow(2) + cos(x).pow(2); }
}  // namespace

TEST_F(CompileTest, CompilesLazilyOnFirstCall) {
  auto cf = compile(sin2cos2, {.backend = "eager"});
  EXPECT_EQ(count("captures"), 0);  // wrapping compiles nothing
  Tensor x = randn({64});
  Tensor y = cf(x);
  EXPECT_EQ(count("captures"), 1);
  EXPECT_EQ(count("compiles"), 1);
  EXPECT_TRUE(allclose(y, sin2cos2(x)));
  EXPECT_TRUE(y.has_storage());
  Tensor y2 = cf(randn({64}));
  EXPECT_EQ(count("captures"), 1);
  EXPECT_EQ(count("guard_hits"), 1);
  EXPECT_TRUE(allclose(y2, ones({64})));
}

TEST_F(CompileTest, GuardMissRecompilesWithReason) {
  auto cf = compile(sin2cos2, {.backend = "eager", .name = "f", .arg_names = {"x"}});
  cf(randn({8}));
  cf(randn({8}));
  cf(randn({16}));
  EXPECT_EQ(count("recompiles"), 1);
  EXPECT_EQ(count("captures"), 2);
  cf(randn({8}, kFloat64));
  EXPECT_EQ(count("recompiles"), 2);
  cf(noncontiguous(randn({4, 3})));
  cf(randn({4, 3}));  // contiguous strides differ: another variant
  EXPECT_EQ(count("captures"), 5);
  cf(randn({16}));
  EXPECT_EQ(count("captures"), 5);
}

TEST_F(CompileTest, RecompileLogNamesTheGuard) {
  std::string text = log_of("recompiles", [] {
    auto cf = compile(sin2cos2, {.backend = "eager", .name = "f", .arg_names = {"x"}});
    cf(randn({8}));
    cf(randn({16}));
  });
  EXPECT_NE(text.find("recompiling f: tensor 'x' size[0] changed 8 -> 16"), std::string::npos)
      << text;
}

TEST_F(CompileTest, ScalarsAreSpecialised) {
  auto cf = compile(
      [](const Tensor& x, double a, int64_t n, bool neg) {
        Tensor y = x * a + n;
        return neg ? -y : y;
      },
      {.backend = "eager"});
  Tensor x = randn({5});
  EXPECT_TRUE(allclose(cf(x, 2.0, int64_t{3}, false), x * 2.0 + 3));
  EXPECT_TRUE(allclose(cf(x, 2.0, int64_t{3}, true), -(x * 2.0 + 3)));
  EXPECT_TRUE(allclose(cf(x, 0.5, int64_t{3}, true), -(x * 0.5 + 3)));
  EXPECT_EQ(count("captures"), 3);
  cf(x, 2.0, int64_t{3}, true);
  EXPECT_EQ(count("captures"), 3);
}

TEST_F(CompileTest, CapturedTensorsAreReferencesNotCopies) {
  Tensor w = ones({3});
  auto cf = compile([&w](const Tensor& x) { return x * w; }, {.backend = "eager"});
  Tensor x = full({3}, 2.0);
  expect_close(cf(x), {2, 2, 2}, {3});
  w.mul_(5);  // the user updates the weight in place
  expect_close(cf(x), {10, 10, 10}, {3});
  EXPECT_EQ(count("captures"), 1);
}

// What the graph baked in about a captured tensor is guarded like an input: a weight that
// starts requiring grad after the first call gets a training graph, as eager would.
TEST_F(CompileTest, CapturedTensorsAreGuarded) {
  Tensor w = full({3}, 2.0);
  Tensor x = full({3}, 3.0);
  std::string text = log_of("recompiles,guards", [&] {
    auto cf = compile([&w](const Tensor& x) { return (x * w).sum(); },
                      {.backend = "aot_eager", .name = "f"});
    EXPECT_FALSE(cf(x).requires_grad());
    EXPECT_FALSE(cf(x).requires_grad());
    EXPECT_EQ(count("recompiles"), 0);
    w.requires_grad_();
    Tensor y = cf(x);
    EXPECT_EQ(count("recompiles"), 1);
    y.backward();
    expect_close(w.grad(), {3, 3, 3}, {3});
  });
  EXPECT_NE(text.find("captured captured: float32 sizes [3]"), std::string::npos) << text;
  EXPECT_NE(text.find("recompiling f: captured tensor 'captured' requires_grad changed false -> "
                      "true"),
            std::string::npos)
      << text;
}

TEST_F(CompileTest, ResultsOfManyKinds) {
  auto cf = compile(
      [](const Tensor& a, const std::vector<Tensor>& bs) {
        std::vector<Tensor> out;
        for (const auto& b : bs) out.push_back(a + b);
        return std::make_tuple(a.sum(), out, 42);
      },
      {.backend = "eager"});
  Tensor a = randn({2, 2});
  auto [s, list, n] = cf(a, std::vector<Tensor>{ones({2, 2}), full({2}, 3.0)});
  EXPECT_TRUE(allclose(s, a.sum()));
  ASSERT_EQ(list.size(), 2u);
  EXPECT_TRUE(allclose(list[1], a + 3));
  EXPECT_EQ(n, 42);
  auto split_fn = compile([](const Tensor& x) { return chunk(x, 2); }, {.backend = "eager"});
  auto parts = split_fn(arange(0, 4, 1, kFloat32));
  ASSERT_EQ(parts.size(), 2u);
  expect_close(parts[1], {2, 3}, {2});
}

TEST_F(CompileTest, InPlaceUpdatesOfInputsAndCapturedTensors) {
  Tensor state = zeros({3});
  auto step = compile(
      [&state](const Tensor& x, const Tensor& g) {
        x.sub_(g * 0.5);  // the caller's tensor changes
        state.add_(1);    // a captured tensor changes
        Tensor t = x * 2;
        t.add_(1);  // an intermediate: just a new value
        return t;
      },
      {.backend = "eager"});
  Tensor x = full({3}, 4.0), g = full({3}, 2.0);
  Tensor y = step(x, g);
  expect_close(x, {3, 3, 3}, {3});
  expect_close(state, {1, 1, 1}, {3});
  expect_close(y, {7, 7, 7}, {3});
  step(x, g);
  expect_close(x, {2, 2, 2}, {3});
  expect_close(state, {2, 2, 2}, {3});
  EXPECT_EQ(count("captures"), 1);
}

namespace {
// A loop whose trip count depends on a tensor's value: impossible to capture whole.
Tensor halve_until_small(const Tensor& x) {
  Tensor y = x * 1.0;
  while (y.abs().amax().item<double>() > 1.0) y = y * 0.5;
  return y + 1;
}
}  // namespace

TEST_F(CompileTest, GraphBreaksRunSegmentsAndMatchEager) {
  auto cf = compile(halve_until_small, {.backend = "eager"});
  for (double scale : {3.0, 20.0, 0.5, 100.0, 3.0}) {
    Tensor x = full({4}, scale);
    EXPECT_TRUE(allclose(cf(x), halve_until_small(x))) << scale;
  }
  EXPECT_EQ(count("captures"), 1);  // guards hold sizes, not values: later calls replay
  EXPECT_GT(count("graph_breaks"), 0);
  EXPECT_GT(count("cache_hits"), 0);  // segments are reused across calls
}

TEST_F(CompileTest, FullgraphMakesABreakAnError) {
  auto cf = compile(halve_until_small, {.backend = "eager", .fullgraph = true, .name = "halve"});
  EXPECT_COIL_ERROR(cf(full({4}, 3.0)), "test_compile.cpp");
  EXPECT_COIL_ERROR(cf(full({4}, 3.0)), "fullgraph");
}

TEST_F(CompileTest, CacheLimitFallsBackToEager) {
  auto cf = compile(sin2cos2, {.backend = "eager", .dynamic = false, .cache_size_limit = 2});
  cf(randn({1}));
  cf(randn({2}));
  Tensor x = randn({3});
  EXPECT_TRUE(allclose(cf(x), sin2cos2(x)));
  EXPECT_EQ(count("captures"), 2);
  EXPECT_EQ(count("eager_fallbacks"), 1);
}

TEST_F(CompileTest, DisableRunsEagerly) {
  setenv("COIL_DISABLE", "1", 1);
  compiler_reset();
  auto cf = compile(sin2cos2);
  Tensor x = randn({4});
  EXPECT_TRUE(allclose(cf(x), sin2cos2(x)));
  EXPECT_EQ(count("captures"), 0);
  unsetenv("COIL_DISABLE");
  compiler_reset();
}

// mode="reduce-overhead" on the CPU: CUDA graphs need a GPU, so the function runs as in the
// default mode, and the cudagraphs log says why.
TEST_F(CompileTest, ReduceOverheadOnTheCpuRunsAsDefault) {
  std::string log = log_of("cudagraphs", [&] {
    auto cf = compile(sin2cos2, {.mode = "reduce-overhead"});
    for (int call = 0; call < 3; ++call) {
      Tensor x = randn({4});
      EXPECT_TRUE(allclose(cf(x), sin2cos2(x)));
    }
    EXPECT_EQ(count("cudagraph_recordings"), 0);
  });
  EXPECT_NE(log.find("run without a CUDA graph: input 0 is on cpu"), std::string::npos) << log;
}

// mode="max-autotune" on the CPU: nothing to tune (oneDNN's convolutions time their forms in
// every mode), so the function runs as in the default mode.
TEST_F(CompileTest, MaxAutotuneOnTheCpuRunsAsDefault) {
  for (const char* mode : {"max-autotune", "max-autotune-no-cudagraphs"}) {
    auto cf = compile(sin2cos2, {.mode = mode});
    Tensor x = randn({4});
    EXPECT_TRUE(allclose(cf(x), sin2cos2(x))) << mode;
  }
}

// Each mode, parsed once, answers what it asks of the pipeline.
TEST(CompileMode, EachModeSaysWhatItAsks) {
  EXPECT_FALSE(records_cuda_graphs(compile_mode("default")));
  EXPECT_FALSE(autotunes(compile_mode("default")));
  EXPECT_TRUE(records_cuda_graphs(compile_mode("reduce-overhead")));
  EXPECT_FALSE(autotunes(compile_mode("reduce-overhead")));
  EXPECT_TRUE(records_cuda_graphs(compile_mode("max-autotune")));
  EXPECT_TRUE(autotunes(compile_mode("max-autotune")));
  EXPECT_FALSE(records_cuda_graphs(compile_mode("max-autotune-no-cudagraphs")));
  EXPECT_TRUE(autotunes(compile_mode("max-autotune-no-cudagraphs")));
  EXPECT_COIL_ERROR(compile_mode("max-autotune-"), "known modes: default, reduce-overhead");
}

// The options, parsed once: each known one a field with its default, unknown names and values
// that are not bools clear errors.
TEST(CompileFlags, OptionsBecomeFields) {
  const CompileFlags defaults = compile_flags(CompileOptions{});
  EXPECT_FALSE(defaults.trace_enabled);
  EXPECT_FALSE(defaults.trace_graph_diagram);
  EXPECT_TRUE(defaults.async_compile);
  EXPECT_FALSE(defaults.freezing);
  const CompileFlags set =
      compile_flags({.options = {{"async_compile", false}, {"freezing", true}}});
  EXPECT_FALSE(set.async_compile);
  EXPECT_TRUE(set.freezing);
  EXPECT_COIL_ERROR(compile_flags({.options = {{"freeze", true}}}),
                    "known options: trace.enabled, trace.graph_diagram, async_compile, freezing");
  EXPECT_COIL_ERROR(compile_flags({.options = {{"freezing", int64_t{1}}}}), "takes true or false");
}

TEST_F(CompileTest, BadOptionsAreClearErrors) {
  EXPECT_COIL_ERROR(compile(sin2cos2, {.backend = "tvm"}),
                    "known backends: eager, aot_eager, inductor");
  EXPECT_COIL_ERROR(compile(sin2cos2, {.mode = "turbo"}), "known modes");
  EXPECT_COIL_ERROR(compile(sin2cos2, {.options = {{"trace.enabld", true}}}), "known options");
  auto bad = compile([](const Tensor& x) { return x + ones({3}); }, {.backend = "eager"});
  EXPECT_COIL_ERROR(bad(ones({4})), "cannot be broadcast");
  // A failed capture leaves no hook behind: eager still works.
  EXPECT_TRUE(allclose(ones({2}) + 1, full({2}, 2.0)));
}

TEST_F(CompileTest, ConcurrentFirstCallsCompileOnce) {
  auto cf = compile(sin2cos2, {.backend = "eager"});
  Tensor x = randn({256});
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      for (int r = 0; r < 20; ++r) ok += allclose(cf(x), ones({256}), 1e-5, 1e-5);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 160);
  EXPECT_EQ(count("captures"), 1);
}

TEST_F(CompileTest, EveryBackendMatchesEager) {
  for (const char* backend : {"eager", "aot_eager", "inductor"}) {
    auto cf = compile([](const Tensor& x, const Tensor& w) { return softmax(x.matmul(w), -1); },
                      {.backend = backend});
    Tensor x = randn({5, 7}), w = randn({7, 3});
    EXPECT_TRUE(allclose(cf(x, w), softmax(x.matmul(w), -1), 1e-5, 1e-6)) << backend;
  }
}
