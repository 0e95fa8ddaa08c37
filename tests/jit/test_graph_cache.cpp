// The compiled-graph cache (jit/graph_cache.h): a graph compiled once is served from disk to a
// later compile, which then runs no stage after capture, and computes what the full compile
// computes. Each test has its own empty cache directory (JitTest); "a later compile" is a new
// compiled function after compiler_reset() and an emptied in-memory library cache, which is
// what a new process sees.
#include <coil/coil.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "compile/compile_fx.h"
#include "debug/log.h"
#include "graph/interpreter.h"
#include "graph/parser.h"
#include "jit/disk_cache.h"
#include "jit_testing.h"
#include "testing.h"

namespace coil::testing {
namespace {

namespace fs = std::filesystem;

class GraphCacheTest : public JitTest {
 protected:
  void SetUp() override {
    JitTest::SetUp();
    unsetenv("COIL_GRAPH_CACHE");
    unsetenv("COIL_LOGS");
    debug::reload_log_settings();
    compiler_reset();
  }
  void TearDown() override {
    unsetenv("COIL_GRAPH_CACHE");
    unsetenv("COIL_LOGS");
    debug::reload_log_settings();
    compiler_reset();
    JitTest::TearDown();
  }
  // What a new process has: no compiled functions, no loaded libraries, counters at zero.
  static void forget_process_state() {
    compiler_reset();
    jit::clear_memory_cache();
    jit::reset_stats();
  }
  static int64_t count(const char* name) { return counters()[name]; }
  // The entries' plans (each kernel's source lies beside its plan, as <key>.src).
  std::vector<fs::path> entries() const {
    std::vector<fs::path> out;
    if (!fs::exists(fs::path(cache_dir_) / "graphs")) return out;
    for (const auto& e : fs::recursive_directory_iterator(fs::path(cache_dir_) / "graphs"))
      if (e.path().extension() == ".json") out.push_back(e.path());
    return out;
  }
};

// A product (an extern call with literal arguments), a fused pointwise and reduction kernel,
// and a captured tensor (a parameter of the graph). Its layer norm's row sums cancel to about
// zero: results match eager to float32's rounding of values of order 1, an absolute 1e-5, not
// to a tolerance relative to the result.
Tensor model(const Tensor& x, const Tensor& w) {
  return softmax(matmul(x, w) * 0.5, 1) + layer_norm(x, {x.size(1)}, {}, {}, 1e-5).sum({1}, true);
}

TEST_F(GraphCacheTest, SecondCompileIsServedFromDiskAndComputesTheSame) {
  Tensor x = random({6, 8}), w = random({8, 8});
  Tensor expected = model(x, w);
  auto f = [&w](const Tensor& x) { return model(x, w); };
  Tensor first = compile(f)(x);
  EXPECT_TRUE(allclose(first, expected, 1e-5, 1e-5));
  EXPECT_EQ(count("graph_cache_misses"), 1);
  EXPECT_EQ(count("graph_cache_hits"), 0);
  ASSERT_EQ(entries().size(), 1u);
  int64_t kernels = count("generated_kernels"), externs = count("extern_calls");
  EXPECT_GE(kernels, 1);
  EXPECT_GE(externs, 1);

  forget_process_state();
  Tensor second = compile(f)(x);
  EXPECT_EQ(count("graph_cache_hits"), 1);
  EXPECT_EQ(count("graph_cache_misses"), 0);
  EXPECT_EQ(jit::stats().compiles, 0);  // the library came from the code cache
  EXPECT_EQ(count("generated_kernels"), kernels);
  EXPECT_EQ(count("extern_calls"), externs);
  EXPECT_TRUE(equal(second, first));
  EXPECT_EQ(entries().size(), 1u);
}

// A dynamic graph's entry serves a new process at any size: no stage, no C++ compile. Its size
// guards (lowering's too) come with it: a call that breaks one still recompiles.
TEST_F(GraphCacheTest, DynamicGraphsServeANewProcessAtOtherSizes) {
  Tensor w = random({8, 8});
  auto f = [&w](const Tensor& x) { return model(x, w); };
  compile(f, {.dynamic = true})(random({6, 8}));
  EXPECT_EQ(count("graph_cache_misses"), 1);

  forget_process_state();
  auto cf = compile(f, {.dynamic = true});
  for (int64_t rows : {13, 2, 40}) {
    Tensor x = random({rows, 8});
    // The layer norm's row sums are zero up to rounding: an absolute tolerance above it.
    EXPECT_TRUE(allclose(cf(x), model(x, w), 1e-5, 1e-5)) << rows << " rows";
  }
  EXPECT_EQ(count("graph_cache_hits"), 1);
  EXPECT_EQ(count("graph_cache_misses"), 0);
  EXPECT_EQ(count("captures"), 1);
  EXPECT_EQ(jit::stats().compiles, 0);
  EXPECT_EQ(entries().size(), 1u);
}

TEST_F(GraphCacheTest, ParametersAreBoundNotBakedIn) {
  Tensor x = random({6, 8}), w1 = random({8, 8}), w2 = random({8, 8});
  compile([&w1](const Tensor& x) { return model(x, w1); })(x);
  forget_process_state();
  // The same graph (same shapes, same parameter name) over another tensor.
  Tensor got = compile([&w2](const Tensor& x) { return model(x, w2); })(x);
  EXPECT_EQ(count("graph_cache_hits"), 1);
  EXPECT_TRUE(allclose(got, model(x, w2), 1e-5, 1e-5));
  EXPECT_FALSE(allclose(got, model(x, w1), 1e-3, 1e-3));
}

TEST_F(GraphCacheTest, AnotherLayoutIsAnotherEntry) {
  Tensor w = random({8, 8});
  auto f = [&w](const Tensor& x) { return model(x, w); };
  compile(f)(random({6, 8}));
  forget_process_state();
  Tensor t = random({8, 6}).t();  // same sizes, other strides
  Tensor got = compile(f)(t);
  EXPECT_EQ(count("graph_cache_misses"), 1);
  EXPECT_TRUE(allclose(got, model(t, w), 1e-5, 1e-5));
  EXPECT_EQ(entries().size(), 2u);
}

TEST_F(GraphCacheTest, LiteralConstantsAndNumbersSurviveExactly) {
  // A constant that is no parameter is stored by value (a subnormal among its elements); the
  // extern call's literal arguments (a float, a bool) by their bits.
  const std::string text =
      R"(def forward(self, x: "f32[4, 3][3, 1]cpu", q: "f32[2, 5, 4][20, 4, 1]cpu"):
    c: "f32[3][1]cpu" = coil.constant([0.1, -2.5, 3e-39])
    mul: "f32[4, 3][3, 1]cpu" = coil.mul(x, c)
    clamp: "f32[4, 3][3, 1]cpu" = coil.clamp(mul, -inf, 0.75)
    attn: "f32[2, 5, 4][20, 4, 1]cpu" = coil.scaled_dot_product_attention(q, q, q, None, 0.0, True, 0.3)
    return (clamp, attn)
)";
  auto g = std::make_shared<const Graph>(parse_graph(text));
  Tensor x = random({4, 3}), q = random({2, 5, 4});
  std::vector<Tensor> expected = interpret(*g, {x, q});
  CompileOptions o;
  std::vector<Tensor> first = compile_fx(g, o, "literal").run({x, q});
  EXPECT_EQ(count("extern_calls"), 1);
  forget_process_state();
  std::vector<Tensor> second = compile_fx(g, o, "literal").run({x, q});
  EXPECT_EQ(count("graph_cache_hits"), 1);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(allclose(first[i], expected[i], 1e-5, 1e-6)) << i;
    EXPECT_TRUE(equal(second[i], first[i])) << i;
  }
  ASSERT_EQ(entries().size(), 1u);
  std::ifstream in(entries()[0]);
  std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(json.find("\"elements\""), std::string::npos);
}

TEST_F(GraphCacheTest, IndexChecksStillRaise) {
  Tensor w = random({10, 8});
  auto f = [](const Tensor& w, const Tensor& i) { return embedding(w, i) + 1; };
  Tensor good = randint(0, 10, {6});
  compile(f)(w, good);
  forget_process_state();
  auto cf = compile(f);
  EXPECT_TRUE(allclose(cf(w, good), f(w, good)));
  EXPECT_EQ(count("graph_cache_hits"), 1);
  Tensor bad = good.clone();
  bad.slice(0, 2, 3).fill_(12);
  EXPECT_COIL_ERROR(cf(w, bad), "embedding: index 12 is out of range for a dimension of size 10");
}

TEST_F(GraphCacheTest, TrainingGraphsAreServedToo) {
  manual_seed(3);
  Tensor x = random({12, 8}), w = random({16, 8}).requires_grad_(), b = random({16});
  auto loss_of = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    return gelu(linear(x, w, b)).pow(2).mean();
  };
  Tensor eager = loss_of(x, w, b);
  eager.backward();
  Tensor eager_grad = w.grad().clone();
  w.set_grad({});
  compile(loss_of)(x, w, b).backward();
  EXPECT_EQ(count("graph_cache_misses"), 2);  // the forward and the backward
  w.set_grad({});
  forget_process_state();
  Tensor loss = compile(loss_of)(x, w, b);
  loss.backward();
  EXPECT_EQ(count("graph_cache_hits"), 2);
  EXPECT_NEAR(loss.item<double>(), eager.item<double>(), 1e-5);
  EXPECT_TRUE(allclose(w.grad(), eager_grad, 1e-4, 1e-5));
}

TEST_F(GraphCacheTest, UnreadableEntryIsAMissAndIsReplaced) {
  Tensor w = random({8, 8}), x = random({6, 8});
  auto f = [&w](const Tensor& x) { return model(x, w); };
  compile(f)(x);
  ASSERT_EQ(entries().size(), 1u);
  fs::path entry = entries()[0], source = fs::path(entry).replace_extension(".src");
  ASSERT_TRUE(fs::exists(source));
  std::string good = jit::read_sealed(entry).contents;
  // Well-formed JSON that the wrapper could not run: a slot out of range, a kind unknown.
  // Written sealed, so that the plan's own checks are what refuse them.
  std::string bad_release =
      std::regex_replace(good, std::regex(R"("releases":\[\])"), R"("releases":[-5])");
  std::string bad_kind = std::regex_replace(good, std::regex(R"("kind":2)"), R"("kind":9)");
  ASSERT_NE(bad_release, good);
  ASSERT_NE(bad_kind, good);
  for (std::string junk :
       {std::string("{not json"),
        std::string(R"({"format": "coil-graph-1", "kernels": true, "plan": {}})"), bad_release,
        bad_kind, std::string("no source")}) {
    SCOPED_TRACE(junk.substr(0, 80));
    if (junk == "no source")
      fs::remove(source);
    else
      jit::write_file_atomically(entry, junk, /*sealed=*/true);
    forget_process_state();
    EXPECT_TRUE(allclose(compile(f)(x), model(x, w), 1e-5, 1e-5));
    EXPECT_EQ(count("graph_cache_misses"), 1);
    forget_process_state();
    compile(f)(x);
    EXPECT_EQ(count("graph_cache_hits"), 1);  // the miss wrote a good entry over it
  }
}

// Damaged files (cut short, or their bytes changed) fail their seal: set aside with one
// warning, compiled again, and the next process finds a good entry.
TEST_F(GraphCacheTest, DamagedFilesAreSetAsideAndRebuilt) {
  Tensor w = random({8, 8}), x = random({6, 8});
  auto f = [&w](const Tensor& x) { return model(x, w); };
  compile(f)(x);
  ASSERT_EQ(entries().size(), 1u);
  const fs::path entry = entries()[0], source = fs::path(entry).replace_extension(".src");
  for (const fs::path& file : {entry, source}) {
    for (bool truncate : {true, false}) {
      SCOPED_TRACE(file.extension().string() + (truncate ? " cut short" : " a byte changed"));
      std::string bytes = *jit::read_file(file);
      if (truncate)
        bytes.resize(bytes.size() / 2);
      else
        bytes[bytes.size() / 3] ^= 0x20;
      std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
      forget_process_state();
      ::testing::internal::CaptureStderr();
      EXPECT_TRUE(allclose(compile(f)(x), model(x, w), 1e-5, 1e-5));
      // Warned the first time a file is found damaged in a process; logged every time.
      std::string warning = ::testing::internal::GetCapturedStderr();
      EXPECT_EQ(warning.find("coil: warning: the cache file '" + file.string() + "' is damaged") !=
                    std::string::npos,
                truncate)
          << warning;
      EXPECT_TRUE(fs::exists(file.string() + ".damaged"));
      EXPECT_EQ(count("graph_cache_misses"), 1);
      forget_process_state();
      compile(f)(x);
      EXPECT_EQ(count("graph_cache_hits"), 1);
    }
  }
}

TEST_F(GraphCacheTest, OffWithCoilGraphCache0) {
  setenv("COIL_GRAPH_CACHE", "0", 1);
  Tensor w = random({8, 8}), x = random({6, 8});
  auto f = [&w](const Tensor& x) { return model(x, w); };
  compile(f)(x);
  forget_process_state();
  EXPECT_TRUE(allclose(compile(f)(x), model(x, w), 1e-5, 1e-5));
  EXPECT_EQ(count("graph_cache_hits") + count("graph_cache_misses"), 0);
  EXPECT_TRUE(entries().empty());
}

TEST_F(GraphCacheTest, WatchedStagesRunEvenWhenCached) {
  Tensor w = random({8, 8}), x = random({6, 8});
  auto f = [&w](const Tensor& x) { return model(x, w); };
  compile(f)(x);
  fs::path log = fs::path(cache_dir_) / "log.txt";
  setenv("COIL_LOGS", "fusion", 1);
  setenv("COIL_LOG_FILE", log.c_str(), 1);
  debug::reload_log_settings();
  forget_process_state();
  compile(f)(x);
  unsetenv("COIL_LOG_FILE");
  compiler_reset();  // closes the log file
  EXPECT_EQ(count("graph_cache_hits") + count("graph_cache_misses"), 0);
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("[fusion]"), std::string::npos) << text;
}

}  // namespace
}  // namespace coil::testing
