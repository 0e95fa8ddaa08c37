// The GPU: tensors moving there and back, the caching allocator's statistics, every registry op
// eagerly on the GPU and compiled for it, against the CPU. Each test skips, saying why, where
// coil was built without CUDA or there is no GPU; the error paths run everywhere.
#include <coil/coil.h>
#include <coil/cuda.h>

#include "compile/compile_fx.h"
#include "cuda_testing.h"
#include "graph/interpreter.h"
#include "graph/op_examples.h"
#include "graph/parser.h"
#include "graph/printer.h"
#include "testing.h"

#include <regex>
#include <sstream>

using namespace coil;
using namespace coil::testing;

namespace {

void expect_same(const Tensor& gpu, const Tensor& cpu, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(gpu.device(), kCUDA);
  ASSERT_EQ(gpu.dtype(), cpu.dtype());
  ASSERT_EQ(gpu.sizes(), cpu.sizes());
  Tol tol = tol_for(cpu.dtype());
  if (!is_floating(cpu.dtype())) tol = {0, 0};
  expect_close(gpu.cpu(), values(cpu), cpu.sizes(), std::max(tol.rtol, 2e-5), tol.atol);
}

}  // namespace

TEST(Cuda, WithoutAGpuMovingThereIsAClearError) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is present";
  Tensor x = ones({2, 3});
  EXPECT_COIL_ERROR(x.to(kCUDA), cuda::is_built() ? "is not available" : "without CUDA");
  EXPECT_EQ(cuda::memory_allocated(), 0);
}

TEST(Cuda, TensorsMoveThereAndBack) {
  COIL_REQUIRE_GPU();
  for (DType t : {kFloat32, kFloat64, kInt64, kInt32, kBool, kFloat16, kBFloat16, kUInt8}) {
    Tensor x = random({5, 7}, t, 0, 4);
    Tensor g = x.cuda();
    EXPECT_EQ(g.device(), kCUDA);
    EXPECT_EQ(values(g.cpu()), values(x)) << dtype_name(t);
    // A strided view of a GPU tensor comes back with the view's elements.
    EXPECT_EQ(values(g.t().cpu()), values(x.t().contiguous())) << dtype_name(t);
  }
  Tensor s = full({}, 3.5).cuda();
  EXPECT_EQ(s.item<double>(), 3.5);
}

TEST(Cuda, AllocatorStatisticsFollowTensors) {
  COIL_REQUIRE_GPU();
  cuda::synchronize();
  const int64_t before = cuda::memory_allocated();
  {
    Tensor g = empty({1024, 1024}, kFloat32, kCUDA);
    EXPECT_EQ(cuda::memory_allocated(), before + 4 * 1024 * 1024);
    EXPECT_GE(cuda::memory_reserved(), cuda::memory_allocated());
    EXPECT_GE(cuda::max_memory_allocated(), cuda::memory_allocated());
  }
  EXPECT_EQ(cuda::memory_allocated(), before);
  cuda::empty_cache();
  EXPECT_GE(cuda::memory_reserved(), cuda::memory_allocated());
}

TEST(Cuda, OutOfMemoryIsAClearError) {
  COIL_REQUIRE_GPU();
  EXPECT_COIL_ERROR(empty({int64_t{1} << 42}, kFloat32, kCUDA), "out of memory on cuda:0");
  Tensor still = ones({4}, kFloat32, kCUDA);  // the allocator works on
  EXPECT_EQ(still.sum().item<double>(), 4.0);
}

TEST(Cuda, MixingDevicesIsAClearError) {
  COIL_REQUIRE_GPU();
  EXPECT_COIL_ERROR(ones({3}) + ones({3}).cuda(), "expected all tensors on one device");
}

TEST(Cuda, CopiesAndFillsWriteIntoViews) {
  COIL_REQUIRE_GPU();
  Tensor g = zeros({4, 6}, kFloat32, kCUDA);
  g.slice(1, 1, 4).fill_(2.0);
  g.select(0, 2).copy_(arange(0, 6, 1, kInt64).cuda());
  Tensor c = zeros({4, 6});
  c.slice(1, 1, 4).fill_(2.0);
  c.select(0, 2).copy_(arange(0, 6, 1, kInt64));
  expect_same(g, c, "writes into views");
}

// The example's arguments with its tensors, and the devices its factories name, on the GPU.
std::vector<Arg> on_gpu(std::vector<Arg> args) {
  for (Arg& a : args) {
    if (auto* t = std::get_if<Tensor>(&a)) *t = t->cuda();
    if (auto* ts = std::get_if<std::vector<Tensor>>(&a))
      for (Tensor& t : *ts) t = t.cuda();
    if (auto* d = std::get_if<Device>(&a)) *d = kCUDA;
  }
  return args;
}

// Every op of the registry eagerly on the GPU, example by example, against the CPU.
TEST(Cuda, EveryOpEagerMatchesTheCpu) {
  COIL_REQUIRE_GPU();
  std::map<std::string, Tensor> host = example_values();
  for (const OpExample& ex : op_examples()) {
    if (ex.random) continue;
    OpId op = *find_op(ex.op);
    std::vector<Arg> cpu_args = example_args(ex, host);
    normalize_args(op, cpu_args);
    std::vector<Tensor> want, got;
    try {
      want = run_eager(op, cpu_args);
    } catch (const Error& e) {
      if (is_pending(e)) continue;
      throw;
    }
    try {
      got = run_eager(op, on_gpu(cpu_args));
    } catch (const std::exception& e) {
      ADD_FAILURE() << ex.op << ": " << e.what();
      continue;
    }
    ASSERT_EQ(got.size(), want.size()) << ex.op;
    for (size_t i = 0; i < got.size(); ++i)
      expect_same(
          want[i].device() == kCPU && ex.op == std::string("to_device") ? got[i].cuda() : got[i],
          want[i], ex.op);
  }
}

// Every op's example as a graph compiled for the GPU, against the CPU interpreter.
TEST(Cuda, EveryOpCompiledMatchesTheCpu) {
  COIL_REQUIRE_GPU();
  std::map<std::string, Tensor> values = example_values();
  for (const OpExample& ex : op_examples()) {
    if (ex.random || ex.op == std::string("to_device")) continue;
    Graph cpu_graph = example_graph(ex);
    // The same graph on the GPU: its inputs' device changed, the results' annotations left
    // to the parser to compute.
    std::istringstream text(print_graph(cpu_graph));
    std::string line, gpu_text;
    std::getline(text, line);
    for (size_t at = 0; (at = line.find("]cpu", at)) != std::string::npos;)
      line.replace(at, 4, "]cuda:0");
    gpu_text = line + "\n";
    static const std::regex annotation(R"re(^(\s+\w+): "[^"]*" = )re");
    while (std::getline(text, line))
      gpu_text += std::regex_replace(line, annotation, "$1 = ") + "\n";
    std::vector<Tensor> cpu_in, gpu_in;
    for (const Node* p : cpu_graph.placeholders()) {
      cpu_in.push_back(values.at(p->name()));
      gpu_in.push_back(cpu_in.back().cuda());
    }
    std::vector<Tensor> got, want = interpret(cpu_graph, cpu_in);
    try {
      auto gpu_graph = std::make_shared<const Graph>(parse_graph(gpu_text));
      got = compile_fx(gpu_graph, CompileOptions{}, std::string("cuda_") + ex.op).run(gpu_in);
    } catch (const std::exception& e) {
      ADD_FAILURE() << ex.op << ": " << e.what();
      continue;
    }
    ASSERT_EQ(got.size(), want.size()) << ex.op;
    for (size_t i = 0; i < got.size(); ++i) expect_same(got[i], want[i], ex.op);
  }
}

// coil::compile on GPU tensors: the workloads' programs, against the same on the CPU.
TEST(Cuda, CompiledFunctionsMatchTheCpu) {
  COIL_REQUIRE_GPU();
  auto softmax_f = [](const Tensor& x) { return softmax(x, -1); };
  auto ln_gelu = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    return gelu(layer_norm(x, {x.size(-1)}, w, b));
  };
  auto sincos = [](const Tensor& x) { return sin(x).pow(2) + cos(x).pow(2); };
  auto sums = [](const Tensor& x) {
    return std::vector<Tensor>{x.sum({0}), x.amax({1}), x.argmax(1)};
  };
  Tensor x = random({33, 300}), w = random({300}), b = random({300});
  expect_same(compile(softmax_f)(x.cuda()), softmax_f(x), "softmax");
  expect_same(compile(ln_gelu)(x.cuda(), w.cuda(), b.cuda()), ln_gelu(x, w, b), "layernorm_gelu");
  expect_same(compile(sincos)(x.cuda()), sincos(x), "sincos");
  std::vector<Tensor> got = compile(sums)(x.cuda()), want = sums(x);
  for (size_t i = 0; i < got.size(); ++i) expect_same(got[i], want[i], "reductions");
}
