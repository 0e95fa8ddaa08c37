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

// Every op of the registry eagerly on the GPU, example by example, against the CPU.
TEST(Cuda, EveryOpEagerMatchesTheCpu) {
  COIL_REQUIRE_GPU();
  std::map<std::string, Tensor> host = example_values(), gpu;
  for (const auto& [name, t] : host) gpu[name] = t.cuda();
  for (const OpExample& ex : op_examples()) {
    if (ex.random) continue;
    OpId op = *find_op(ex.op);
    std::vector<Arg> cpu_args = example_args(ex, host), gpu_args = example_args(ex, gpu);
    for (Arg& a : gpu_args)
      if (auto* d = std::get_if<Device>(&a)) *d = kCUDA;
    std::vector<Tensor> want, got;
    try {
      want = run_eager(op, cpu_args);
    } catch (const Error& e) {
      if (is_pending(e)) continue;
      throw;
    }
    got = run_eager(op, gpu_args);
    ASSERT_EQ(got.size(), want.size()) << ex.op;
    for (size_t i = 0; i < got.size(); ++i) expect_same(got[i], want[i], ex.op);
  }
}

// Every op in one graph, compiled for the GPU, against the CPU interpreter.
TEST(Cuda, EveryOpCompiledMatchesTheCpu) {
  COIL_REQUIRE_GPU();
  Graph cpu_graph;
  std::vector<Node*> results;
  std::vector<std::string> labels;
  std::vector<bool> random;
  for (const OpExample& ex : op_examples()) {
    for (Node* r : add_example(cpu_graph, ex)) {
      results.push_back(r);
      labels.push_back(ex.op);
      random.push_back(ex.random);
    }
  }
  cpu_graph.output(results);
  // The same graph on the GPU: its placeholders' device changed in the printed text.
  std::string text = print_graph(cpu_graph);
  for (size_t at = 0; (at = text.find("]cpu", at)) != std::string::npos;)
    text.replace(at, 4, "]cuda:0");
  auto gpu_graph = std::make_shared<const Graph>(parse_graph(text));
  std::map<std::string, Tensor> values = example_values();
  std::vector<Tensor> cpu_in, gpu_in;
  for (const Node* p : cpu_graph.placeholders()) {
    cpu_in.push_back(values.at(p->name()));
    gpu_in.push_back(cpu_in.back().cuda());
  }
  capture::CompiledGraph cg = compile_fx(gpu_graph, CompileOptions{}, "every_op_cuda");
  std::vector<Tensor> got = cg.run(gpu_in);
  std::vector<Tensor> want = interpret(cpu_graph, cpu_in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (!random[i]) expect_same(got[i], want[i], labels[i]);
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
