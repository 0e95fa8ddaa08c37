// The debug folder (COIL_COMPILE_DEBUG / options trace.*), its graph diagram, the compile
// timeline (timeline.json, COIL_TRACE_FILE, the `timeline` log line): every artifact exists
// and says what it should for the seed programs.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "debug/timeline.h"
#include "jit/jit_testing.h"
#include "testing.h"

using namespace coil;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

Tensor sin2cos2(const Tensor& x) { return sin(x).pow(2) + cos(x).pow(2); }
Tensor matmul_softmax(const Tensor& a, const Tensor& b) { return softmax(matmul(a, b), -1); }

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool dot_installed() {
  std::stringstream path(std::getenv("PATH") ? std::getenv("PATH") : "");
  for (std::string dir; std::getline(path, dir, ':');)
    if (::access((fs::path(dir) / "dot").c_str(), X_OK) == 0) return true;
  return false;
}

// A fresh JIT cache (so the compiler really runs and the timeline has a "cc" span) and a fresh
// COIL_DEBUG_DIR; every variable the debug folder reads is unset before and after.
class DebugDirTest : public coil::testing::JitTest {
 protected:
  void SetUp() override {
    JitTest::SetUp();
    std::string pattern = ::testing::TempDir() + "coil-debug-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    clear_env();
    setenv("COIL_DEBUG_DIR", root_.c_str(), 1);
    compiler_reset();
  }
  void TearDown() override {
    clear_env();
    compiler_reset();
    fs::remove_all(root_);
    JitTest::TearDown();
  }
  static void clear_env() {
    for (const char* v : {"COIL_COMPILE_DEBUG", "COIL_DEBUG_DIR", "COIL_TRACE_FILE", "COIL_LOGS",
                          "COIL_LOG_FILE", "COIL_DISABLE"})
      unsetenv(v);
  }

  // The graph folders of this process's run, by name.
  std::map<std::string, fs::path> graph_dirs() const {
    std::map<std::string, fs::path> out;
    for (const auto& run : fs::directory_iterator(root_)) {
      EXPECT_TRUE(std::regex_match(run.path().filename().string(),
                                   std::regex(R"(run_\d{4}(_\d\d){5}-pid_\d+)")))
          << run.path();
      for (const auto& g : fs::directory_iterator(run.path()))
        out[g.path().filename().string()] = g.path();
    }
    return out;
  }

  // The only graph folder; fails the test when there is not exactly one.
  fs::path only_graph_dir() const {
    auto dirs = graph_dirs();
    EXPECT_EQ(dirs.size(), 1u);
    return dirs.empty() ? fs::path() : dirs.begin()->second;
  }

  fs::path root_;
};

CompileOptions traced(const std::string& name, std::vector<std::string> args) {
  CompileOptions o;
  o.name = name;
  o.arg_names = std::move(args);
  o.options = {{"trace.enabled", true}, {"trace.graph_diagram", true}};
  return o;
}

// The node boxes of a diagram (not the legend's swatches): name, label, fill colour.
struct DotNode {
  std::string name, label, fill;
  bool marked;
};
std::vector<DotNode> dot_nodes(const std::string& dot) {
  std::vector<DotNode> out;
  std::regex node(R"re(^\s*n\d+ \[label="([^\\"]*)((?:[^"\\]|\\.)*)"(.*)\];$)re");
  std::regex fill(R"re(fillcolor="([^"]*)")re");
  std::stringstream lines(dot);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, node)) continue;
    DotNode n{m[1], m[2], "white", m[3].str().find("peripheries=2") != std::string::npos};
    std::string rest = m[3];
    if (std::smatch f; std::regex_search(rest, f, fill)) n.fill = f[1];
    out.push_back(n);
  }
  return out;
}

json events_of(const fs::path& p) {
  json trace = json::parse(read(p));  // throws (failing the test) when it is not JSON
  EXPECT_TRUE(trace.contains("traceEvents"));
  json spans = json::array();
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == "X") spans.push_back(e);
  return spans;
}

const json* find_span(const json& spans, const std::string& name) {
  for (const json& e : spans)
    if (e["name"] == name) return &e;
  return nullptr;
}

bool inside(const json& inner, const json& outer) {
  double a = inner["ts"], b = outer["ts"];
  double ea = a + inner["dur"].get<double>(), eb = b + outer["dur"].get<double>();
  return a >= b - 1e-3 && ea <= eb + 1e-3;
}

}  // namespace

TEST_F(DebugDirTest, SeedProgramWritesEveryArtifact) {
  auto cf = compile(sin2cos2, traced("f", {"x"}));
  Tensor x = randn({1024});
  EXPECT_TRUE(allclose(cf(x), sin2cos2(x)));
  fs::path dir = only_graph_dir();
  EXPECT_TRUE(std::regex_match(dir.filename().string(), std::regex(R"(f_\d+_0)"))) << dir;

  EXPECT_NE(read(dir / "graph_code.txt").find("coil.sin(x)"), std::string::npos);
  for (const char* stage : {"pre_grad.txt", "decomposed.txt", "post_grad.txt"}) {
    std::string g = read(dir / stage);
    EXPECT_NE(g.find("def forward(self, x: \"f32[1024][1]cpu\")"), std::string::npos) << stage;
    EXPECT_NE(g.find("coil.cos"), std::string::npos) << stage;
  }
  EXPECT_NE(read(dir / "ir_pre_fusion.txt").find("sin"), std::string::npos);
  EXPECT_NE(read(dir / "ir_post_fusion.txt").find("poi_fused_cos_mul_sin_add_0"),
            std::string::npos);
  EXPECT_NE(read(dir / "fusion.txt").find("new poi_fused_cos_mul_sin_add_0"), std::string::npos);
  std::string code = read(dir / "output_code.cpp");
  EXPECT_NE(code.find("extern \"C\" void poi_fused_cos_mul_sin_add_0"), std::string::npos) << code;
  EXPECT_NE(code.find("// The wrapper"), std::string::npos);
  std::string guards = read(dir / "guards.txt");
  EXPECT_NE(guards.find("x"), std::string::npos) << guards;
  EXPECT_NE(guards.find("1024"), std::string::npos) << guards;

  // The diagram: every call node of sin^2 + cos^2 in the one kernel's colour, in its legend.
  std::string dot = read(dir / "graph_diagram.dot");
  std::set<std::string> call_fills;
  int calls = 0;
  for (const DotNode& n : dot_nodes(dot)) {
    if (n.label.find("\\ncoil.") == std::string::npos) continue;
    ++calls;
    call_fills.insert(n.fill);
    EXPECT_FALSE(n.marked) << n.name;
  }
  EXPECT_GE(calls, 3) << dot;
  ASSERT_EQ(call_fills.size(), 1u) << dot;
  EXPECT_NE(*call_fills.begin(), "white") << dot;
  EXPECT_NE(dot.find("legend_0 [label=\"poi_fused_cos_mul_sin_add_0: pointwise over [1024]"),
            std::string::npos)
      << dot;
  std::string legend = dot.substr(dot.find("legend_0"));
  legend = legend.substr(0, legend.find('\n'));
  EXPECT_NE(legend.find("fillcolor=\"" + *call_fills.begin() + "\""), std::string::npos) << legend;
  EXPECT_EQ(dot.find("legend_1"), std::string::npos) << dot;
  EXPECT_EQ(fs::exists(dir / "graph_diagram.svg"), dot_installed());
  if (dot_installed()) {
    EXPECT_NE(read(dir / "graph_diagram.svg").find("<svg"), std::string::npos);
  }

  // The timeline: the compile, with a span for every stage inside it.
  json spans = events_of(dir / "timeline.json");
  const json* root = nullptr;
  for (const json& e : spans)
    if (e["name"].get<std::string>().rfind("compile f[", 0) == 0) root = &e;
  ASSERT_NE(root, nullptr) << spans.dump(1);
  EXPECT_EQ((*root)["args"]["function"], "f");
  EXPECT_EQ((*root)["args"]["trigger"], "first call");
  EXPECT_EQ((*root)["args"]["result"], "1 kernel, 0 extern calls");
  for (const char* stage : {"capture", "pre_grad passes", "decompositions", "post_grad passes",
                            "lowering", "scheduling", "codegen", "poi_fused_cos_mul_sin_add_0",
                            "jit", "cc", "dlopen", "wrapper", "cse"}) {
    const json* s = find_span(spans, stage);
    ASSERT_NE(s, nullptr) << "no span '" << stage << "' in " << spans.dump(1);
    EXPECT_TRUE(inside(*s, *root)) << stage;
    EXPECT_EQ((*s)["ph"], "X");
    EXPECT_GE((*s)["dur"].get<double>(), 0);
  }
  EXPECT_TRUE(inside(*find_span(spans, "cc"), *find_span(spans, "jit")));
  EXPECT_TRUE(
      inside(*find_span(spans, "poi_fused_cos_mul_sin_add_0"), *find_span(spans, "codegen")));
  EXPECT_EQ((*find_span(spans, "jit"))["args"]["cache"], "miss");
  EXPECT_TRUE(inside(*find_span(spans, "cse"), *find_span(spans, "pre_grad passes")));
}

TEST_F(DebugDirTest, MatmulSoftmaxDiagramShowsExternAndKernel) {
  setenv("COIL_COMPILE_DEBUG", "1", 1);  // the environment turns on the folder and diagram
  auto cf = compile(matmul_softmax, {.name = "attn", .arg_names = {"a", "b"}});
  Tensor a = randn({8, 16}), b = randn({16, 32});
  EXPECT_TRUE(allclose(cf(a, b), matmul_softmax(a, b), 1e-4, 1e-5));
  fs::path dir = only_graph_dir();
  std::string dot = read(dir / "graph_diagram.dot");
  int externs = 0, kernel_nodes = 0;
  for (const DotNode& n : dot_nodes(dot)) {
    if (n.label.find("\\ncoil.") == std::string::npos) continue;
    if (n.marked) {
      ++externs;
      EXPECT_NE(n.label.find("coil.mm"), std::string::npos) << n.label;
      EXPECT_NE(n.label.find("extern: library kernel"), std::string::npos) << n.label;
    } else if (n.fill != "white") {
      ++kernel_nodes;
    }
  }
  EXPECT_EQ(externs, 1) << dot;
  EXPECT_GE(kernel_nodes, 2) << dot;  // softmax's reductions and pointwise work
  EXPECT_NE(dot.find("legend_marked [label=\"extern call"), std::string::npos) << dot;
  EXPECT_NE(dot.find("legend_0 [label=\"red_fused_amax_sub_exp_sum_div_0: "), std::string::npos)
      << dot;
  EXPECT_TRUE(fs::exists(dir / "timeline.json"));
  EXPECT_TRUE(fs::exists(dir / "output_code.cpp"));
}

TEST_F(DebugDirTest, RecompileWritesASecondGraphFolder) {
  CompileOptions o;
  o.name = "f";
  o.arg_names = {"x"};
  o.options = {{"trace.enabled", true}};
  auto cf = compile(sin2cos2, o);
  cf(randn({8}));
  cf(randn({8}));  // a guard hit: no compile, no folder
  cf(randn({16}));
  auto dirs = graph_dirs();
  ASSERT_EQ(dirs.size(), 2u);
  fs::path first = dirs.begin()->second, second = std::next(dirs.begin())->second;
  EXPECT_TRUE(std::regex_match(first.filename().string(), std::regex(R"(f_\d+_0)")));
  EXPECT_TRUE(std::regex_match(second.filename().string(), std::regex(R"(f_\d+_1)")));
  EXPECT_NE(read(first / "guards.txt").find("8"), std::string::npos);
  // The size changed: automatic dynamic compiles the second graph over a symbol.
  EXPECT_NE(read(second / "guards.txt").find("s0 = x.size(0)"), std::string::npos);
  json spans = events_of(second / "timeline.json");
  ASSERT_FALSE(spans.empty());
  EXPECT_EQ(spans[0]["args"]["trigger"], "recompile: tensor 'x' size[0] changed 8 -> 16");
  // trace.enabled without trace.graph_diagram: no diagram.
  EXPECT_FALSE(fs::exists(first / "graph_diagram.dot"));
}

TEST_F(DebugDirTest, NothingIsWrittenWhenNothingIsSet) {
  auto cf = compile(sin2cos2, {.name = "f"});
  cf(randn({8}));
  cf(randn({3, 5}));
  EXPECT_TRUE(fs::is_empty(root_));
}

TEST_F(DebugDirTest, TraceFileCollectsEveryCompileOfTheProcess) {
  fs::path file = root_ / "trace.json";
  setenv("COIL_TRACE_FILE", file.c_str(), 1);
  auto f = compile(sin2cos2, {.name = "f"});
  auto g = compile(matmul_softmax, {.name = "g"});
  f(randn({8}));
  g(randn({4, 4}), randn({4, 4}));
  f(randn({9}));
  json spans = events_of(file);
  int compiles = 0;
  for (const json& e : spans) compiles += e["name"].get<std::string>().rfind("compile ", 0) == 0;
  EXPECT_EQ(compiles, 3) << spans.dump(1);
  EXPECT_EQ(fs::directory_iterator(root_)->path(), file);  // a trace file, but no folders
}

TEST_F(DebugDirTest, TimelineLogLineSumsTheStages) {
  fs::path log = root_ / "log.txt";
  setenv("COIL_LOGS", "timeline", 1);
  setenv("COIL_LOG_FILE", log.c_str(), 1);
  compiler_reset();
  compile(sin2cos2, {.name = "f"})(randn({8}));
  unsetenv("COIL_LOGS");
  compiler_reset();  // closes the log file
  std::string text = read(log);
  std::regex line(
      R"(\[timeline\] f\[\d+/0\] compile f\[\d+/0\] \(1 kernel, 0 extern calls\): [\d.]+ ms = )"
      R"(capture [\d.]+ \+ cache [\d.]+ \+ passes [\d.]+ \+ decompose [\d.]+ \+ lower [\d.]+ )"
      R"(\+ schedule [\d.]+ \+ codegen [\d.]+ \+ load [\d.]+ \+ cc [\d.]+ \+ wrapper [\d.]+ )"
      R"(\+ other [\d.]+\n)");
  EXPECT_TRUE(std::regex_search(text, line)) << text;
}

TEST_F(DebugDirTest, TraceOptionsMustBeBooleans) {
  CompileOptions o;
  o.options = {{"trace.enabled", int64_t{1}}};
  EXPECT_THROW(compile(sin2cos2, o), Error);
}

// The summary's terms add up without double counting: a labelled span nested in another is
// taken out of its parent's term.
TEST(Timeline, SummaryTakesNestedLabelsOutOfTheirParent) {
  using debug::Clock;
  using ms = std::chrono::milliseconds;
  Clock::time_point t0 = Clock::now() - ms(100);
  debug::Timeline t("compile", {}, t0);
  t.add("capture", "capture", t0, ms(10));
  {
    auto jit = t.span("jit", "load");
    t.add("cc", "cc", Clock::now(), ms(30));  // measured inside the jit stage
  }
  t.finish();
  std::string s = t.summary();
  std::smatch m;
  ASSERT_TRUE(std::regex_match(
      s, m,
      std::regex(R"(([\d.]+) ms = capture 10 \+ load 0.00 \+ cc ([\d.]+) \+ other ([\d.]+))")))
      << s;
  EXPECT_EQ(m[2], "30");
  EXPECT_GE(std::stod(m[1]), 100);
}

// Compiled training follows Inductor's order, and its folder shows each step: the pre-grad
// passes run on the captured forward (written-out attention becomes one
// scaled_dot_product_attention call, which keeps its library kernel in the forward and its own
// derivative rule in the backward), then the joint graph is built (joint_graph.txt),
// decomposed, cleaned by the joint-graph passes (joint_graph_passes.txt: CSE merges the two
// equal products that y * y's rule makes), partitioned, and each half goes on alone.
TEST_F(DebugDirTest, TrainingRunsPreGradThenJointGraphPasses) {
  auto f = [](const Tensor& q, const Tensor& k, const Tensor& v) {
    Tensor y = matmul(softmax(matmul(q, k.transpose(-2, -1)) * 0.125, -1), v);
    return (y * y).sum();
  };
  manual_seed(3);
  Tensor q = randn({2, 16, 8}), k = randn({2, 16, 8}), v = randn({2, 16, 8});
  std::vector<Tensor> eager_in, compiled_in;
  for (const Tensor& t : {q, k, v}) {
    eager_in.push_back(t.clone().requires_grad_());
    compiled_in.push_back(t.clone().requires_grad_());
  }
  Tensor expected = f(eager_in[0], eager_in[1], eager_in[2]);
  expected.backward();
  auto cf = compile(f, traced("attn", {"q", "k", "v"}));
  Tensor loss = cf(compiled_in[0], compiled_in[1], compiled_in[2]);
  loss.backward();
  EXPECT_NEAR(loss.item<double>(), expected.item<double>(), 1e-4 * expected.item<double>());
  for (size_t i = 0; i < 3; ++i)
    coil::testing::expect_close(compiled_in[i].grad(), coil::testing::values(eager_in[i].grad()),
                                eager_in[i].sizes(), 1e-4, 1e-5);

  auto dirs = graph_dirs();
  ASSERT_EQ(dirs.size(), 3u) << "the training step, its forward and its backward";
  fs::path step, forward;
  for (const auto& [name, dir] : dirs) {
    if (name.find("forward") != std::string::npos) forward = dir;
    if (fs::exists(dir / "joint_graph.txt")) step = dir;
  }
  ASSERT_FALSE(step.empty());
  const std::string joint = read(step / "joint_graph.txt");
  EXPECT_NE(joint.find("coil.scaled_dot_product_attention("), std::string::npos) << joint;
  auto nodes = [](const std::string& graph) {
    return std::count(graph.begin(), graph.end(), '\n');
  };
  const std::string decomposed = read(step / "decomposed.txt");
  const std::string cleaned = read(step / "joint_graph_passes.txt");
  EXPECT_LT(nodes(cleaned), nodes(decomposed)) << decomposed << "\n" << cleaned;
  // The forward keeps the fused call; only the backward computes the weights again.
  ASSERT_FALSE(forward.empty());
  const std::string forward_graph = read(forward / "post_grad.txt");
  EXPECT_NE(forward_graph.find("coil.scaled_dot_product_attention("), std::string::npos);
  EXPECT_EQ(forward_graph.find("coil.exp("), std::string::npos) << forward_graph;
  EXPECT_NE(read(forward / "output_code.cpp").find("extern scaled_dot_product_attention"),
            std::string::npos);
}
