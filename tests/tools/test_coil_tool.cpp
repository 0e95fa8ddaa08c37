// The `coil` tool, run as a user runs it: each command on an example graph, help, and the
// errors for malformed files, unknown passes and bad command lines (exit status 1, never a
// crash). Two commands compile generated code (codegen, run), both for sin_cos.graph: the
// second finds the first's library in the code cache.
#include <coil/cuda.h>

#include <fstream>

#include "jit/seed_cache.h"
#include "tool_testing.h"

using namespace coil::testing;

namespace {

const char* kSinCos = "examples/graphs/sin_cos.graph";
const char* kSoftmax = "examples/graphs/matmul_softmax.graph";

// Writes `text` to a file in the scratch folder and returns its path.
std::string scratch_file(const std::string& name, const std::string& text) {
  std::string path = scratch_dir() + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

void expect_ok(const ShellResult& r) {
  EXPECT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
}

}  // namespace

TEST(CoilTool, HelpListsEveryCommand) {
  ShellResult r = run_shell("coil help");
  expect_ok(r);
  for (const char* cmd : {"print", "passes", "lower", "codegen", "run", "explain"})
    EXPECT_CONTAINS(r.out, std::string("\n  ") + cmd + " ");
  EXPECT_EQ(run_shell("coil --help").out, r.out);
  // No command at all: the same text, as a mistake.
  EXPECT_EQ(run_shell("coil").exit_code, 1);
}

TEST(CoilTool, EveryCommandHasHelp) {
  for (const char* cmd : {"print", "passes", "lower", "codegen", "run", "explain"}) {
    SCOPED_TRACE(cmd);
    ShellResult r = run_shell(std::string("coil ") + cmd + " --help");
    expect_ok(r);
    EXPECT_CONTAINS(r.out, std::string("usage: coil ") + cmd + " FILE");
    EXPECT_EQ(run_shell(std::string("coil help ") + cmd).out, r.out);
  }
}

TEST(CoilTool, PrintIsCanonicalAndReadsItsOwnOutput) {
  ShellResult r = run_shell(std::string("coil print ") + kSinCos);
  expect_ok(r);
  EXPECT_TRUE(has_line(r.out, "def forward(self, x: \"f32[1024][1]cpu\"):")) << r.out;
  EXPECT_TRUE(has_line(r.out, "pow_1: \"f32[1024][1]cpu\" = coil.pow(cos, 2)")) << r.out;
  EXPECT_EQ(r.out.find('#'), std::string::npos) << "comments are not part of the graph";
  // '-' reads standard input: printing the printed graph changes nothing.
  ShellResult again = run_shell("coil print -", r.out);
  expect_ok(again);
  EXPECT_EQ(again.out, r.out);
}

TEST(CoilTool, PrintDot) {
  ShellResult r = run_shell(std::string("coil print --dot ") + kSinCos);
  expect_ok(r);
  EXPECT_EQ(r.out.rfind("digraph", 0), 0u) << r.out;
  EXPECT_CONTAINS(r.out, "coil.sin");
}

TEST(CoilTool, PassesShowEachChangeAsADiff) {
  ShellResult r = run_shell(std::string("coil passes ") + kSinCos +
                            " --pass cse --pass algebraic_simplification --pass dce --diff");
  expect_ok(r);
  EXPECT_TRUE(has_line(r.out, "== cse: no change")) << r.out;
  EXPECT_TRUE(has_line(r.out, "== algebraic_simplification: changed the graph")) << r.out;
  EXPECT_TRUE(has_line(r.out, "--- before algebraic_simplification")) << r.out;
  EXPECT_TRUE(has_line(r.out, "-    pow_1: \"f32[1024][1]cpu\" = coil.pow(cos, 2)")) << r.out;
  EXPECT_TRUE(has_line(r.out, "+    mul: \"f32[1024][1]cpu\" = coil.mul(cos, cos)")) << r.out;
  EXPECT_TRUE(has_line(r.out, "== dce: no change")) << r.out;
}

TEST(CoilTool, PassesWithoutDiffPrintTheGraph) {
  ShellResult r = run_shell(std::string("coil passes ") + kSoftmax + " --decompose");
  expect_ok(r);
  EXPECT_TRUE(has_line(r.out, "== decompositions: changed the graph")) << r.out;
  EXPECT_CONTAINS(r.out, "= coil.amax(mm, [1], True)");
}

TEST(CoilTool, PassGroupsRunToTheirFixpoint) {
  ShellResult r = run_shell(std::string("coil passes ") + kSoftmax + " --group all");
  expect_ok(r);
  EXPECT_CONTAINS(r.out, "== pre_grad: fixpoint after ");
  EXPECT_TRUE(has_line(r.out, "== decompositions: changed the graph")) << r.out;
  EXPECT_CONTAINS(r.out, "== post_grad: fixpoint after ");
  // Nothing to run is a mistake that says what to give.
  ShellResult none = run_shell(std::string("coil passes ") + kSoftmax);
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_CONTAINS(none.err, "give --pass NAME");
}

TEST(CoilTool, UnknownPassListsTheValidOnes) {
  ShellResult r = run_shell(std::string("coil passes ") + kSinCos + " --pass cse --pass nope");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.err, "unknown pass 'nope'");
  for (const char* p : {"cse", "dce", "constant_folding", "algebraic_simplification"})
    EXPECT_CONTAINS(r.err, p);
  EXPECT_EQ(r.out, "") << "nothing runs before the command line is checked";
  ShellResult g = run_shell(std::string("coil passes ") + kSinCos + " --group nope");
  EXPECT_EQ(g.exit_code, 1);
  EXPECT_CONTAINS(g.err, "unknown pass group 'nope'; the groups are pre_grad");
}

TEST(CoilTool, LowerShowsTheLoopIRBeforeAndAfterFusion) {
  ShellResult r = run_shell(std::string("coil lower ") + kSoftmax);
  expect_ok(r);
  EXPECT_CONTAINS(r.out, "== loop IR before fusion");
  EXPECT_CONTAINS(r.out, "= extern mm(in0 f32[100, 100][100, 1], in1 f32[100, 100][100, 1])");
  EXPECT_CONTAINS(r.out, "reduce_max[100, 1][100]");
  EXPECT_TRUE(has_line(r.out,
                       "== after fusion (src/schedule/): 1 kernel, 1 extern call, in the "
                       "order they run"))
      << r.out;
  EXPECT_TRUE(has_line(r.out, "red_fused_amax_sub_exp_sum_div_0: for x0 < 100; reduce r0 < 100"))
      << r.out;
}

TEST(CoilTool, ExplainGivesEveryDecisionKernelByKernel) {
  ShellResult r = run_shell(std::string("coil explain ") + kSoftmax);
  expect_ok(r);
  EXPECT_TRUE(has_line(r.out, "extern buf0 = mm: library kernel")) << r.out;
  EXPECT_TRUE(has_line(r.out, "red_fused_amax_sub_exp_sum_div_0: reduction over [100] x [100]"))
      << r.out;
  EXPECT_TRUE(has_line(r.out, "graph nodes: amax, sub, exp, sum_1, div")) << r.out;
  EXPECT_TRUE(has_line(r.out, "new red_fused_amax_sub_exp_sum_div_0 for buf1")) << r.out;
  EXPECT_CONTAINS(
      r.out,
      "fuse buf3 into red_fused_amax_sub_exp_sum_div_0: pointwise inside the reduction loop");
  ShellResult dot = run_shell(std::string("coil explain --dot ") + kSoftmax);
  expect_ok(dot);
  EXPECT_EQ(dot.out.rfind("digraph", 0), 0u) << dot.out;
  EXPECT_CONTAINS(dot.out, "cluster_0");
}

TEST(CoilTool, CodegenAndRunCompileOnce) {
  ShellResult code = run_shell(std::string("coil codegen ") + kSinCos);
  expect_ok(code);
  EXPECT_TRUE(
      has_line(code.out, "extern \"C\" void poi_fused_cos_mul_sin_add_0(void* const* args) {"))
      << code.out;
  EXPECT_TRUE(has_line(code.out, "def call(inputs):")) << code.out;
  EXPECT_TRUE(has_line(code.out, "poi_fused_cos_mul_sin_add_0(in0, buf0)")) << code.out;

  ShellResult run = run_shell(std::string("coil run ") + kSinCos + " --seed 3 --reps 2");
  expect_ok(run);
  EXPECT_TRUE(has_line(run.out, "input x: f32[1024][1]cpu")) << run.out;
  EXPECT_CONTAINS(run.out, "(1 kernel, 0 extern calls; code cache hit");
  EXPECT_CONTAINS(run.out, "ok\n");
  EXPECT_CONTAINS(run.out, "time per call (median of 2): eager ");
}

// A graph on a GPU gets CUDA kernels, also where there is no GPU (NVRTC compiles them).
TEST(CoilTool, CodegenOfAGraphOnTheGpuIsCuda) {
  const std::string file = scratch_file("gpu.graph", R"(def forward(self, x: "f32[1024][1]cuda:0"):
    sin: "f32[1024][1]cuda:0" = coil.sin(x)
    relu: "f32[1024][1]cuda:0" = coil.relu(sin)
    return (relu,)
)");
  ShellResult code = run_shell("coil codegen " + file);
  if (!coil::cuda::is_built()) {
    EXPECT_EQ(code.exit_code, 1);
    EXPECT_CONTAINS(code.err, "coil was built without CUDA");
    return;
  }
  expect_ok(code);
  EXPECT_CONTAINS(code.out, "== CUDA source (src/backends/cuda/): 1 kernel");
  EXPECT_CONTAINS(code.out, "__global__ void");
  EXPECT_CONTAINS(code.out, "poi_fused_sin_relu_0(in0, buf0)");
}

TEST(CoilTool, MalformedFilesNameLineAndColumn) {
  std::string bad = scratch_file("bad.graph",
                                 R"(def forward(self, x: "f32[4][1]cpu"):
    y = coil.sinn(x)
    return (y,)
)");
  for (const char* cmd : {"print", "passes --group all", "lower", "codegen", "run", "explain"}) {
    SCOPED_TRACE(cmd);
    ShellResult r = run_shell(std::string("coil ") + cmd + " " + bad);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_CONTAINS(r.err, "coil: error: " + bad + ":2:14: unknown op 'coil.sinn'");
    EXPECT_CONTAINS(r.err, "\n      y = coil.sinn(x)\n               ^\n");
  }
  std::string mismatch = scratch_file("mismatch.graph",
                                      R"(def forward(self, x: "f32[4][1]cpu"):
    y: "f32[5][1]cpu" = coil.sin(x)
    return (y,)
)");
  ShellResult r = run_shell("coil print " + mismatch);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.err, mismatch +
                             ":2:9: the annotation says f32[5][1]cpu but coil.sin computes "
                             "f32[4][1]cpu");
}

// Every prefix of a good file is a malformed one (or a good one): the tool reports it and exits
// with 1, never crashing.
TEST(CoilTool, TruncatedFilesNeverCrash) {
  std::string text = read_whole_file(std::string(COIL_SOURCE_DIR) + "/" + kSoftmax);
  ASSERT_FALSE(text.empty());
  for (size_t cut = 0; cut < text.size(); cut += 37) {
    ShellResult r = run_shell("coil lower -", text.substr(0, cut));
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << "exit " << r.exit_code << " at " << cut;
    if (r.exit_code == 1) {
      EXPECT_CONTAINS(r.err, "coil: error: <stdin>:");
    }
  }
}

TEST(CoilTool, CommandLineMistakes) {
  struct Case {
    const char* command;
    const char* message;
  };
  for (const Case& c : {
           Case{"coil frobnicate x.graph", "unknown command 'frobnicate'"},
           Case{"coil print", "no graph file given"},
           Case{"coil print a.graph b.graph", "one graph file at a time"},
           Case{"coil print --frob x.graph", "unknown option '--frob'"},
           Case{"coil run examples/graphs/sin_cos.graph --reps", "--reps needs a value"},
           Case{"coil run examples/graphs/sin_cos.graph --seed -3", "non-negative integer"},
           Case{"coil print no/such/file.graph", "cannot open graph file 'no/such/file.graph'"},
           Case{"coil config x.graph", "coil config takes no operand"},
       }) {
    SCOPED_TRACE(c.command);
    ShellResult r = run_shell(c.command);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_CONTAINS(r.err, c.message);
  }
}

// A dynamic graph's file (size symbols and their hints) reads, prints back the same, and its
// kernels run over the symbols.
TEST(CoilTool, DynamicGraphFiles) {
  const std::string file = "examples/graphs/dynamic_softmax.graph";
  ShellResult print = run_shell("coil print " + file);
  expect_ok(print);
  std::ifstream in(std::string(COIL_SOURCE_DIR) + "/" + file);
  EXPECT_EQ(print.out, std::string(std::istreambuf_iterator<char>(in), {}));
  ShellResult explain = run_shell("coil explain " + file);
  expect_ok(explain);
  EXPECT_CONTAINS(explain.out, "red_fused_add_amax_sub_exp_sum_div_0: reduction over [s0] x [s1]");
}

// `coil cache seed`, as the build runs it: into the build's seed cache, which holds every
// shipped kernel already (nothing to compile); without CUDA it says there is nothing to ship.
TEST(CoilTool, CacheSeedFillsTheSeedCache) {
  EXPECT_EQ(run_shell("coil cache bogus").exit_code, 1);
  EXPECT_CONTAINS(run_shell("coil cache bogus").err, "(stats, prune, clear or seed)");
  if (!coil::cuda::is_built()) {
    ShellResult r = run_shell("COIL_CACHE_DIR=" + shell_quote(scratch_dir()) + " coil cache seed");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_CONTAINS(r.err, "coil was built without CUDA");
    return;
  }
  const std::string seed = coil::jit::seed_root();
  if (seed.empty()) GTEST_SKIP() << "no seed cache: built with COIL_SEED_KERNELS=OFF";
  ShellResult r = run_shell("COIL_CACHE_DIR=" + shell_quote(seed) + " coil cache seed");
  expect_ok(r);
  EXPECT_CONTAINS(r.out, "compiled:      0 kernel modules");
}

// coil config: every variable of the table, its value where set (empty included), what holds
// where not, and what it does.
TEST(CoilTool, ConfigListsEveryVariable) {
  ShellResult r = run_shell("COIL_LOGS=fusion COIL_SEED_DIR= coil config");
  expect_ok(r);
  EXPECT_CONTAINS(r.out, "COIL_LOGS=fusion\n");
  EXPECT_CONTAINS(r.out, "COIL_SEED_DIR=\n");
  EXPECT_CONTAINS(r.out, "COIL_GRAPH_CACHE unset: on\n");
  EXPECT_CONTAINS(r.out, "COIL_CUDA_ARCH unset: ");
}
