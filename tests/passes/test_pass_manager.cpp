// The pass manager: groups repeat until a fixpoint, report whether they changed anything and
// refuse to loop forever; the pipeline's groups on small graphs.
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "debug/log.h"
#include "pass_testing.h"
#include "passes/pass.h"

using namespace coil;
using namespace coil::testing;

namespace {

const char* kHead = "def forward(self, x: \"f32[4, 6][6, 1]cpu\", y: \"f32[6][1]cpu\"):\n";

// Each pass enables another that ran before it in the same round: the group needs a second
// round (CSE merges the two muls only once no-op removal has made their inputs one node).
TEST(PassManager, RepeatsTheGroupUntilNothingChanges) {
  Graph g = parse_graph(std::string(kHead) +
                        "    a = coil.add(x, 0)\n"
                        "    m1 = coil.mul(a, y)\n"
                        "    m2 = coil.mul(x, y)\n"
                        "    s = coil.sub(m1, m2)\n"
                        "    return (s,)\n");
  std::vector<Pass> group = {
      {"cse", run_cse}, {"remove_noops", run_remove_noops}, {"dce", run_dce}};
  EXPECT_TRUE(run_pass_group(g, "test", group, "[test]"));
  EXPECT_EQ(print_graph(g), canonical(std::string(kHead) + "    m1 = coil.mul(x, y)\n"
                                                           "    s = coil.sub(m1, m1)\n"
                                                           "    return (s,)\n"));
  EXPECT_FALSE(run_pass_group(g, "test", group, "[test]"));
}

bool always_changes(Graph&) { return true; }

TEST(PassManager, AGroupThatNeverSettlesIsABug) {
  Graph g = parse_graph(std::string(kHead) + "    return (x,)\n");
  try {
    run_pass_group(g, "test", {{"dce", run_dce}, {"always_changes", always_changes}}, "");
    ADD_FAILURE() << "expected an InternalError";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("'test' still changes the graph"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("always_changes"), std::string::npos) << e.what();
  }
}

// Sets COIL_LOGS and COIL_LOG_FILE for one test, and puts back what was there.
class ScopedLogs {
 public:
  ScopedLogs(const char* artifacts, const std::string& file) {
    for (const char* name : {"COIL_LOGS", "COIL_LOG_FILE"})
      if (const char* v = std::getenv(name)) saved_.emplace_back(name, v);
    setenv("COIL_LOGS", artifacts, 1);
    setenv("COIL_LOG_FILE", file.c_str(), 1);
    debug::reload_log_settings();
  }
  ~ScopedLogs() {
    unsetenv("COIL_LOGS");
    unsetenv("COIL_LOG_FILE");
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
    debug::reload_log_settings();  // closes the file
  }

 private:
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST(PassManager, LogsEveryPassEveryRewriteAndTheChangedGraphs) {
  std::string path = ::testing::TempDir() + "coil_test_passes.log";
  std::remove(path.c_str());
  const char* kMm =
      "def forward(self, a: \"f32[4, 6][6, 1]cpu\", b: \"f32[6, 5][5, 1]cpu\", "
      "bias: \"f32[5][1]cpu\"):\n";
  {
    ScopedLogs logs("passes,passes_graphs", path);
    Graph g = parse_graph(std::string(kMm) +
                          "    m = coil.mm(a, b)\n"
                          "    z = coil.add(m, 0)\n"
                          "    s = coil.add(z, bias)\n"
                          "    return (s,)\n");
    run_pass_group(
        g, "test",
        {{"remove_noops", run_remove_noops}, {"post_grad_patterns", run_post_grad_patterns}},
        "[fn]");
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string log = text.str();
  for (const char* line :
       {"[passes] [fn] test round 1: remove_noops changed the graph (",
        "[passes_graphs] [fn] test after remove_noops:\n"
        "[passes_graphs] [fn] def forward(self, a: \"f32[4, 6][6, 1]cpu\"",
        "[passes_graphs] [fn]     s: \"f32[4, 5][5, 1]cpu\" = coil.add(m, bias)\n",
        "[passes] pattern add(mm(a, b), bias) -> addmm(bias, a, b): s -> addmm\n",
        "[passes] [fn] test round 1: post_grad_patterns changed the graph (",
        "[passes_graphs] [fn]     addmm: \"f32[4, 5][5, 1]cpu\" = coil.addmm(bias, a, b)\n",
        "[passes] [fn] test round 2: remove_noops no change (",
        "[passes] [fn] test round 2: post_grad_patterns no change (",
        "[passes] [fn] test: fixpoint after 2 round(s)\n"})
    EXPECT_NE(log.find(line), std::string::npos) << "missing: " << line << "\nin:\n" << log;
  std::remove(path.c_str());
}

// The groups of the pipeline, end to end on one graph each.
TEST(PassManager, PreGradGroup) {
  const char* before =
      R"(def forward(self, x: "f32[4, 6][6, 1]cpu", y: "f32[6][1]cpu"):
    c: "f32[2][1]cpu" = coil.constant([4.0, 9.0])
    r = coil.sqrt(c)
    t = coil.transpose(x, 0, 1)
    u = coil.t(t)
    a = coil.mul(u, 1)
    p = coil.pow(a, 2)
    q = coil.mul(x, x)
    n = coil.neg(q)
    s = coil.add(p, n)
    v = coil.view(s, [12, 2])
    w = coil.mul(v, r)
    unused = coil.exp(w)
    return (w,)
)";
  Graph original = parse_graph(before), g = parse_graph(before);
  EXPECT_TRUE(run_pass_group(g, "pre_grad", pre_grad_passes(), ""));
  EXPECT_EQ(print_graph(g),
            canonical(R"(def forward(self, x: "f32[4, 6][6, 1]cpu", y: "f32[6][1]cpu"):
    constant: "f32[2][1]cpu" = coil.constant([2.0, 3.0])
    mul = coil.mul(x, x)
    n = coil.neg(mul)
    s = coil.add(mul, n)
    v = coil.view(s, [12, 2])
    w = coil.mul(v, constant)
    return (w,)
)"));
  expect_same_results(original, g, random_inputs(original));
}

TEST(PassManager, JointGraphGroup) {
  const char* before =
      R"(def forward(self, x: "f32[4, 6][6, 1]cpu", g: "f32[4, 6][6, 1]cpu"):
    s = coil.sin(x)
    c1 = coil.cos(x)
    c2 = coil.cos(x)
    gc = coil.mul(g, c1)
    d = coil.mul(gc, 1.0)
    unused = coil.mul(c2, 2)
    return (s, d)
)";
  Graph original = parse_graph(before), g = parse_graph(before);
  EXPECT_TRUE(run_pass_group(g, "joint_graph", joint_graph_passes(), ""));
  EXPECT_EQ(print_graph(g),
            canonical(R"(def forward(self, x: "f32[4, 6][6, 1]cpu", g: "f32[4, 6][6, 1]cpu"):
    s = coil.sin(x)
    c1 = coil.cos(x)
    gc = coil.mul(g, c1)
    return (s, gc)
)"));
  expect_same_results(original, g, random_inputs(original));
}

// A linear layer as the decompositions leave it: the bias add and the relu end in the GEMM.
TEST(PassManager, PostGradGroup) {
  const char* before =
      R"(def forward(self, x: "f32[8, 16][16, 1]cpu", w: "f32[32, 16][16, 1]cpu", b: "f32[32][1]cpu"):
    wt = coil.transpose(w, 0, 1)
    m = coil.mm(x, wt)
    wt2 = coil.t(w)
    m2 = coil.mm(x, wt2)
    a = coil.add(b, m2)
    r = coil.relu(a)
    v = coil.view(r, [8, 32])
    return (v, m)
)";
  Graph original = parse_graph(before), g = parse_graph(before);
  EXPECT_TRUE(run_pass_group(g, "post_grad", post_grad_passes(), ""));
  // After CSE the product has two users, so the bias add stays a pointwise kernel.
  EXPECT_EQ(
      print_graph(g),
      canonical(
          R"(def forward(self, x: "f32[8, 16][16, 1]cpu", w: "f32[32, 16][16, 1]cpu", b: "f32[32][1]cpu"):
    permute = coil.permute(w, [1, 0])
    m = coil.mm(x, permute)
    a = coil.add(b, m)
    r = coil.relu(a)
    return (r, m)
)"));
  expect_same_results(original, g, random_inputs(original));

  const char* single =
      R"(def forward(self, x: "f32[8, 16][16, 1]cpu", w: "f32[32, 16][16, 1]cpu", b: "f32[32][1]cpu"):
    wt = coil.transpose(w, 0, 1)
    m = coil.mm(x, wt)
    a = coil.add(b, m)
    r = coil.relu(a)
    return (r,)
)";
  Graph original2 = parse_graph(single), g2 = parse_graph(single);
  EXPECT_TRUE(run_pass_group(g2, "post_grad", post_grad_passes(), ""));
  EXPECT_EQ(
      print_graph(g2),
      canonical(
          R"(def forward(self, x: "f32[8, 16][16, 1]cpu", w: "f32[32, 16][16, 1]cpu", b: "f32[32][1]cpu"):
    permute = coil.permute(w, [1, 0])
    addmm_relu = coil.addmm_relu(b, x, permute)
    return (addmm_relu,)
)"));
  expect_same_results(original2, g2, random_inputs(original2));
}

}  // namespace
