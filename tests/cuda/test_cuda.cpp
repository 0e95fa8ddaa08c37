// The GPU: tensors moving there and back, the caching allocator's statistics, every registry op
// eagerly on the GPU and compiled for it, against the CPU (the library ops and coil's own
// kernels for them: test_cuda_library_ops.cpp). Each test skips, saying why, where
// coil was built without CUDA or there is no GPU; the error paths run everywhere.
#include <coil/coil.h>
#include <coil/cuda.h>

#include <cmath>

#include "compile/compile_fx.h"
#include "cuda_testing.h"
#include "graph/interpreter.h"
#include "graph/op_examples.h"
#include "graph/registry.h"
#include "jit/code_cache.h"
#include "testing.h"

using namespace coil;
using namespace coil::testing;

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

// The copy kernel merges dims that step evenly and hands dense same-dtype copies to the driver:
// each kind of geometry against the CPU.
TEST(Cuda, CopiesOfEveryGeometry) {
  COIL_REQUIRE_GPU();
  Tensor x = arange(0, 2 * 3 * 4 * 5, 1, kFloat32).reshape({2, 3, 4, 5});
  Tensor gx = x.cuda();
  expect_same(gx.clone(), x, "dense clone (the driver's copy)");
  expect_same(gx.slice(0, 1, 2).clone(), x.slice(0, 1, 2), "a dense slice");
  expect_same(gx.slice(2, 1, 3).clone(), x.slice(2, 1, 3), "rows of a slice (merged outer dims)");
  expect_same(gx.transpose(1, 3).contiguous(), x.transpose(1, 3).contiguous(), "a transpose");
  expect_same(gx.slice(3, 0, 5, 2).clone(), x.slice(3, 0, 5, 2), "a stride of 2");
  expect_same(gx.to(kFloat64), x.to(kFloat64), "dense, another dtype");
  expect_same(gx.select(1, 0).select(1, 0).select(1, 0).clone(),
              x.select(1, 0).select(1, 0).select(1, 0), "one strided dim");
  Tensor g = zeros({2, 3, 4, 5}, kFloat32, kCUDA), c = zeros({2, 3, 4, 5});
  g.copy_(gx.select(0, 1).select(1, 2).unsqueeze(1));
  c.copy_(x.select(0, 1).select(1, 2).unsqueeze(1));
  expect_same(g, c, "a broadcast source");
  Tensor s = full({}, 3.0, kFloat32, kCUDA);
  expect_same(s.clone(), full({}, 3.0), "a 0-dim tensor");
}

// The (normalized) arguments of `op` with their tensors, and a factory's device, on the GPU.
std::vector<Arg> on_gpu(OpId op, std::vector<Arg> args) {
  const auto& params = op_info(op).schema.args;
  for (size_t i = 0; i < args.size(); ++i) {
    Arg& a = args[i];
    if (auto* t = std::get_if<Tensor>(&a)) *t = t->cuda();
    if (auto* ts = std::get_if<std::vector<Tensor>>(&a))
      for (Tensor& t : *ts) t = t.cuda();
    if (std::holds_alternative<Device>(a) || (i < params.size() && params[i].name == "device"))
      a = kCUDA;
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
      got = run_eager(op, on_gpu(op, cpu_args));
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
    if (op_info(*find_op(ex.op)).kind == OpKind::Factory) continue;  // Cuda.FactoriesOnTheGpu
    Graph cpu_graph = example_graph(ex);
    std::vector<Tensor> cpu_in, gpu_in;
    for (const Node* p : cpu_graph.placeholders()) {
      cpu_in.push_back(values.at(p->name()));
      gpu_in.push_back(cpu_in.back().cuda());
    }
    std::vector<Tensor> got, want = interpret(cpu_graph, cpu_in);
    try {
      auto gpu_graph = std::make_shared<const Graph>(on_gpu(cpu_graph));
      got = compile_fx(gpu_graph, CompileOptions{}, std::string("cuda_") + ex.op).run(gpu_in);
    } catch (const std::exception& e) {
      ADD_FAILURE() << ex.op << ": " << e.what();
      continue;
    }
    ASSERT_EQ(got.size(), want.size()) << ex.op;
    for (size_t i = 0; i < got.size(); ++i) expect_same(got[i], want[i], ex.op);
  }
}

// Factories compiled for the GPU, their results read by another op (a graph of a factory alone
// is the factory's eager kernel).
TEST(Cuda, FactoriesOnTheGpu) {
  COIL_REQUIRE_GPU();
  auto f = [](const Tensor& x) {
    return std::vector<Tensor>{x + full({4, 6}, 1.5, kFloat32, kCUDA),
                               x + arange(0, 6, 1, kFloat32, kCUDA),
                               x.narrow(1, 0, 4) + eye(4, std::nullopt, kFloat32, kCUDA)};
  };
  auto g = [](const Tensor& x) {
    return std::vector<Tensor>{x + full({4, 6}, 1.5, kFloat32), x + arange(0, 6, 1, kFloat32),
                               x.narrow(1, 0, 4) + eye(4, std::nullopt, kFloat32)};
  };
  Tensor x = random({4, 6});
  std::vector<Tensor> got = compile(f)(x.cuda()), want = g(x);
  for (size_t i = 0; i < got.size(); ++i) expect_same(got[i], want[i], "factory");
  expect_same(linspace(0, 1, 7, kFloat32, kCUDA), linspace(0, 1, 7, kFloat32), "linspace");
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
  // A rotary embedding's cosine and sine of one angle (one sincos call) in the other dtypes.
  auto rotary = [](const Tensor& x, const Tensor& t) { return x * cos(t) + sin(t) * 0.5; };
  for (DType dt : {kFloat64, kFloat16}) {
    Tensor xd = random({33, 300}, dt), t = random({33, 300}, dt);
    expect_same(compile(rotary)(xd.cuda(), t.cuda()), rotary(xd, t), dtype_name(dt),
                dt == kFloat16 ? 1e-2 : 1e-12);
  }
}

// Dynamic graphs on the GPU: one graph per function (sizes as kernel arguments, the grid from
// them at each launch) serves every size, pointwise, rows, columns and products.
TEST(Cuda, DynamicGraphsServeEverySize) {
  COIL_REQUIRE_GPU();
  compiler_reset();
  auto f = [](const Tensor& x, const Tensor& b) {
    Tensor y = softmax(x + b, -1);
    return std::vector<Tensor>{y, (y * x).sum({0}), matmul(x.t(), x), gelu(x).flatten()};
  };
  auto cf = compile(f, {.dynamic = true});
  for (auto [rows, cols] : {std::pair{33, 300}, {5, 7}, {1000, 129}, {2, 2048}}) {
    Tensor x = random({rows, cols}), b = random({cols});
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols));
    std::vector<Tensor> got = cf(x.cuda(), b.cuda()), want = f(x, b);
    for (size_t i : {0, 1, 3}) expect_same(got[i], want[i], "output " + std::to_string(i));
    // The product's entries are sums of `rows` terms of either sign: an absolute tolerance.
    expect_close(got[2].cpu(), values(want[2]), want[2].sizes(), 1e-4, 1e-5 * rows);
  }
  EXPECT_EQ(counters()["captures"], 1);
}

// Pinned host memory: pin_memory copies into page-locked memory (contiguous); a non-blocking
// copy from it to the GPU is queued without the host waiting, and the GPU reads what the tensor
// held; a non-blocking copy to the host lands in pinned memory.
TEST(Cuda, PinnedMemoryCopiesWithoutWaiting) {
  COIL_REQUIRE_GPU();
  Tensor x = random({1000, 33});
  Tensor p = x.pin_memory();
  EXPECT_TRUE(p.is_pinned());
  EXPECT_FALSE(x.is_pinned());
  EXPECT_TRUE(p.pin_memory().shares_storage(p));  // pinned already: itself
  expect_close(p, values(x), x.sizes(), 0, 0);
  Tensor g = p.cuda(0, /*non_blocking=*/true);
  expect_same(g * 2.0, x * 2.0, "a non-blocking copy");
  expect_same(x.cuda(0, true), x, "non_blocking from pageable memory: an ordinary copy");
  Tensor t = x.t().pin_memory();
  EXPECT_TRUE(t.is_contiguous());
  expect_same(t.cuda(0, true), x.t().contiguous(), "a transposed tensor, pinned");
  EXPECT_COIL_ERROR(x.cuda().pin_memory(), "only CPU tensors can be pinned");

  // Back to the host without waiting: into new pinned memory, readable after a synchronise.
  Tensor back = (g * 3.0).to(kCPU, /*non_blocking=*/true);
  EXPECT_TRUE(back.is_pinned());
  cuda::synchronize();
  expect_close(back, values(x * 3.0), x.sizes(), 1e-6, 0);
  // A compiled graph's copy waits (work after it in the graph would read it at once).
  auto f = compile([](const Tensor& y) { return (y * 2.0).to(kCPU, true); });
  Tensor waited = f(g);
  EXPECT_FALSE(waited.is_pinned());
  expect_close(waited, values(x * 2.0), x.sizes(), 1e-6, 0);
}

TEST(Cuda, PinningWithoutAGpuIsAClearError) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is present";
  EXPECT_COIL_ERROR(random({3}).pin_memory(), "pin_memory");
}

// Eager ops on the GPU compile one dynamic graph per size pattern (duck sizing: which sizes are
// equal, which are 0 or 1): new shapes of the same pattern compile nothing. A reduction long
// enough to break the first graph's guards compiles a second one, and no more after it.
TEST(Cuda, EagerOpsCompileOncePerSizePattern) {
  COIL_REQUIRE_GPU();
  auto run = [](int64_t rows, int64_t cols) {
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols));
    Tensor x = random({rows, cols}), b = random({cols});
    Tensor xc = x.cuda(), bc = b.cuda();
    expect_same(xc.sin() * bc + 1.0, x.sin() * b + 1.0, "pointwise, broadcast");
    expect_same(softmax(xc, -1), softmax(x, -1), "softmax");
    // A column's rounding error grows with its length (sqrt(rows) for random signs), and a sum
    // near zero has no relative precision to speak of.
    expect_same(xc.sum({0}), x.sum({0}), "column sums", 1e-4,
                1e-5 * std::sqrt(static_cast<double>(rows)));
  };
  run(6, 40);  // compiles each op's graph for this pattern
  jit::reset_stats();
  for (auto [rows, cols] : {std::pair{9, 17}, {130, 3}, {2, 1000}}) run(rows, cols);
  EXPECT_EQ(jit::stats().compiles, 0);
  run(1000, 999);  // guards of the small graphs may fail here: at most one more compile each
  const int64_t after_large = jit::stats().compiles;
  run(1500, 700);
  EXPECT_EQ(jit::stats().compiles, after_large);
}

// Views (a transpose, a slice, a broadcast) take their strides at run time too: new shapes of
// the same size-and-stride pattern compile nothing.
TEST(Cuda, EagerOpsOnViewsCompileOncePerPattern) {
  COIL_REQUIRE_GPU();
  auto run = [](int64_t rows, int64_t cols) {
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols));
    Tensor x = random({rows, cols + 3}), y = random({cols, rows}), b = random({rows, 1});
    Tensor xc = x.cuda(), yc = y.cuda(), bc = b.cuda();
    auto slice = [&](const Tensor& t) { return t.as_strided({rows, cols}, {cols + 3, 1}, 1); };
    auto wide = [&](const Tensor& t) { return t.expand({rows, cols}); };
    expect_same(slice(xc).exp() + yc.t(), slice(x).exp() + y.t(), "slice + transpose");
    expect_same(wide(bc) * yc.t(), wide(b) * y.t(), "broadcast view");
    expect_same(softmax(yc.t(), -1), softmax(y.t(), -1), "softmax of a transpose");
    expect_same(slice(xc).sum({0}), slice(x).sum({0}), "column sums of a slice", 1e-4);
  };
  run(6, 40);
  jit::reset_stats();
  for (auto [rows, cols] : {std::pair{9, 17}, {130, 3}, {2, 100}}) run(rows, cols);
  EXPECT_EQ(jit::stats().compiles, 0);
}

// In-place methods on the GPU write their op's result straight into the tensor where nothing
// else reads it differently; otherwise (an overlapping operand, a layout the kernel does not
// write, a recorded op) through a copy. Either way the values are the CPU's.
TEST(Cuda, InPlaceOpsWriteTheirTensor) {
  COIL_REQUIRE_GPU();
  Tensor x = random({33, 33}), y = random({33});
  auto check = [&](const std::string& what, auto&& f) {
    SCOPED_TRACE(what);
    Tensor cpu = x.clone(), gpu = x.cuda();
    const void* before = gpu.impl()->data();
    f(cpu, y);
    f(gpu, y.cuda());
    EXPECT_EQ(gpu.impl()->data(), before);
    expect_same(gpu, cpu, what);
  };
  check("mul_ by a scalar", [](const Tensor& t, const Tensor&) { t.mul_(2.5); });
  check("add_ a broadcast row", [](const Tensor& t, const Tensor& r) { t.add_(r); });
  check("add_ itself", [](const Tensor& t, const Tensor&) { t.add_(t); });
  check("sub_ its transpose", [](const Tensor& t, const Tensor&) { t.sub_(t.t()); });
  check("div_ of a transposed view", [](const Tensor& t, const Tensor& r) { t.t().div_(r + 3.0); });
  check("clamp_ then relu_", [](const Tensor& t, const Tensor&) { t.clamp_(-0.5, 0.7).relu_(); });
  Tensor w = x.cuda().requires_grad_(), v = w * 1.0;
  v.mul_(3.0);  // recorded: autograd's own path
  v.sum().backward();
  expect_same(w.grad(), full({33, 33}, 3.0), "gradient through mul_");
}

// cumsum and scatter_add run on the GPU (no CPU copies): cumsum in every dim and the dtype rules
// (integers to int64, dtype=), on a view too, and over few long lines (in chunks), equal to the
// CPU's sums; scatter_add with repeated
// targets in each dim and dtype (8-bit integers wrapping, bools or-ed, neighbouring bytes of a
// word written by other threads); an index out of range is the CPU's error.
TEST(Cuda, ScanAndScatterRunOnTheGpu) {
  COIL_REQUIRE_GPU();
  const std::string log = log_of("device_eager", [&] {
    for (DType t : {kFloat32, kFloat64, kFloat16, kInt64, kInt32, kBool}) {
      SCOPED_TRACE(dtype_name(t));
      Tensor x = is_floating(t) ? random({5, 300, 3}, t) : random({5, 300, 3}, t, 0, 3);
      Tensor xc = x.cuda();
      for (int64_t dim : {0, 1, -1}) expect_same(cumsum(xc, dim), cumsum(x, dim), "cumsum", 1e-4);
      expect_same(cumsum(xc.transpose(0, 2), 1, kFloat64), cumsum(x.transpose(0, 2), 1, kFloat64),
                  "cumsum of a view, as float64");
      // Few long lines, cut into chunks (a sampler's probabilities over a vocabulary).
      for (const Shape& s : {Shape{50257}, Shape{3, 100003}, Shape{2, 70001, 2}}) {
        Tensor y = is_floating(t) ? random(s, t, 0, 1) : random(s, t, 0, 3);
        const int64_t dim = s.size() == 3 ? 1 : -1;
        expect_same(cumsum(y.cuda(), dim), cumsum(y, dim), "cumsum of few long lines", 1e-4);
      }
    }
    for (DType t :
         {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kInt8, kUInt8, kBool}) {
      SCOPED_TRACE(dtype_name(t));
      // (8-bit sums wrap: values up to 120 make them overflow; bools or.)
      const double lo = t == kUInt8 ? 0 : t == kBool ? 0 : t == kInt8 ? -120 : -5;
      const double hi = t == kBool ? 2 : t == kInt8 || t == kUInt8 ? 120 : 5;
      Tensor self = is_floating(t) ? random({6, 7}, t) : random({6, 7}, t, lo, hi);
      Tensor src = is_floating(t) ? random({9, 7}, t) : random({9, 7}, t, lo, hi);
      Tensor rows = random({9, 7}, kInt64, 0, 6), cols = random({6, 5}, kInt64, 0, 7);
      expect_same(scatter_add(self.cuda(), 0, rows.cuda(), src.cuda()),
                  scatter_add(self, 0, rows, src), "along dim 0", 1e-2);
      expect_same(scatter_add(self.cuda(), 1, cols.cuda(), src.t().cuda()),
                  scatter_add(self, 1, cols, src.t()), "along dim 1, src a view", 1e-2);
    }
  });
  EXPECT_EQ(log.find("on the CPU"), std::string::npos) << log;
  Tensor bad = full({2, 2}, int64_t{7}, kInt64).cuda();
  // (Raised when the host next waits for the GPU: here, the copy to the host.)
  EXPECT_COIL_ERROR(scatter_add(zeros({3, 2}).cuda(), 0, bad, ones({2, 2}).cuda()).cpu(),
                    "scatter_add: index 7 is out of bounds for dim 0");
}

// A CPU 0-dim tensor mixes with GPU tensors in pointwise ops, as torch's CPU scalars do (copied
// to the GPU first): eagerly, compiled, and through autograd (its gradient on the CPU). A CPU
// tensor with dims beside a GPU one is still an error that says what to do.
// Reductions down columns (32 columns a block where there are enough of them, few long ones
// split in pieces first, else a block each): column counts that are and are not multiples of 32,
// passes that use an earlier pass's result (softmax, variance), integer and boolean folds, eager
// and compiled, against the CPU.
TEST(Cuda, ColumnReductionsMatchTheCpu) {
  COIL_REQUIRE_GPU();
  auto f = [](const Tensor& x) {
    return std::vector<Tensor>{x.sum({0}),       softmax(x, 0),    x.amax({0}),
                               x.var({0}),       (x * x).sum({0}), (x > 0.5).to(kInt64).sum({0}),
                               any(x > 2.5, {0})};
  };
  auto cf = compile(f);
  for (auto [rows, cols] :
       {std::pair{4096, 768}, {2048, 300}, {1536, 2304}, {1000, 70}, {64, 5000}, {37, 4100}}) {
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols));
    Tensor x = random({rows, cols});
    const std::vector<Tensor> want = f(x), eager = f(x.cuda()), compiled = cf(x.cuda());
    const double atol = 1e-5 * std::sqrt(static_cast<double>(rows));
    for (size_t i = 0; i < want.size(); ++i) {
      expect_same(eager[i], want[i], "eager " + std::to_string(i), 1e-4, atol);
      expect_same(compiled[i], want[i], "compiled " + std::to_string(i), 1e-4, atol);
    }
  }
}

// Softmax over logits as wide as a product makes: most probabilities lie far below FLT_MIN.
// The compiled division keeps them (nothing flushed to zero): each element within 1e-5 of the
// CPU's, relative, or within eight subnormal steps.
TEST(Cuda, SoftmaxOfWideLogitsKeepsItsTinyProbabilities) {
  COIL_REQUIRE_GPU();
  Tensor x = random({512, 2048}, kFloat32, -100, 100);
  auto f = [](const Tensor& a) { return softmax(a, 1); };
  const std::vector<double> want = values(f(x)), got = values(compile(f)(x.cuda()).cpu());
  size_t subnormal = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_LE(std::fabs(got[i] - want[i]), 1e-5 * std::fabs(want[i]) + 8 * 0x1p-149)
        << "at " << i << ": " << got[i] << " against " << want[i];
    subnormal += want[i] != 0 && want[i] < 0x1p-126;
  }
  EXPECT_GT(subnormal, want.size() / 50);  // the case under test: 8 % of the elements
}

// Rows a group of threads covers in runs of four (lengths a multiple of 128, up to 8192) hold
// the row in registers across its passes: group sizes 32 to 256, one row a block or several,
// an input read by every pass (softmax, layer norm, variance) or by one (a sum), rows whose
// views are not aligned to a vector (the passes then loop one element at a time), and rows of
// a batch of run-time size; eager and compiled, against the CPU.
TEST(Cuda, RowsInRegistersMatchTheCpu) {
  COIL_REQUIRE_GPU();
  auto f = [](const Tensor& x, const Tensor& w) {
    return std::vector<Tensor>{softmax(x, 1), layer_norm(x, {x.size(1)}, w, w), x.var({1}),
                               x.sum({1}), log_softmax(x * 2.0, 1)};
  };
  auto cf = compile(f), dynamic = compile(f, {.dynamic = true});
  for (auto [rows, cols, offset] : {std::tuple{2048, 512, 0},
                                    {4096, 1024, 0},
                                    {6, 8192, 0},
                                    {10, 256, 0},
                                    {3000, 768, 0},
                                    {20, 4096, 1},
                                    {2048, 1024, 2}}) {
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols) + " at offset " +
                 std::to_string(offset));
    // A view `offset` elements into each row of a wider tensor: its rows start unaligned (made
    // on the GPU: a copy to the GPU is contiguous).
    Tensor wide = random({rows, cols + offset}), w = random({cols});
    Tensor x = wide.slice(1, offset, cols + offset);
    Tensor xg = wide.cuda().slice(1, offset, cols + offset), wg = w.cuda();
    const std::vector<Tensor> want = f(x, w), eager = f(xg, wg);
    const std::vector<Tensor> compiled = cf(xg, wg);
    const std::vector<Tensor> symbolic = dynamic(xg, wg);
    for (size_t i = 0; i < want.size(); ++i) {
      expect_same(eager[i], want[i], "eager " + std::to_string(i), 1e-4, 1e-4);
      expect_same(compiled[i], want[i], "compiled " + std::to_string(i), 1e-4, 1e-4);
      expect_same(symbolic[i], want[i], "dynamic " + std::to_string(i), 1e-4, 1e-4);
    }
  }

  // Rows of run-time length (first seen 512 long: groups of 64 threads, two runs each): whole
  // runs of the group up to 512 take the unrolled passes (one run of two for 256), longer rows
  // and lengths of other multiples of four loop four at a time, the rest and rows that start
  // unaligned (a contiguous tensor one element into its storage) one at a time; one graph.
  auto g = [](const Tensor& x) {
    return std::vector<Tensor>{softmax(x, 1), log_softmax(x, 1), x.sum({1})};
  };
  compiler_reset();
  auto rows_dynamic = compile(g, {.dynamic = true});
  for (auto [rows, cols, offset] : {std::tuple{4096, 512, 0},
                                    {100, 512, 0},
                                    {300, 256, 0},
                                    {64, 1024, 0},
                                    {50, 300, 0},
                                    {17, 130, 0},
                                    {8, 512, 1}}) {
    SCOPED_TRACE("dynamic " + std::to_string(rows) + " x " + std::to_string(cols) + " at offset " +
                 std::to_string(offset));
    Tensor flat = random({rows * cols + offset});
    auto rows_of = [&](const Tensor& t) {
      return t.narrow(0, offset, rows * cols).view({rows, cols});
    };
    const std::vector<Tensor> want = g(rows_of(flat)), got = rows_dynamic(rows_of(flat.cuda()));
    for (size_t i = 0; i < want.size(); ++i)
      expect_same(got[i], want[i], "output " + std::to_string(i), 1e-4, 1e-4);
  }
  EXPECT_EQ(counters()["captures"], 1);
}

TEST(Cuda, CpuScalarsMixWithGpuTensors) {
  COIL_REQUIRE_GPU();
  Tensor x = random({5, 7}), s = random({});
  Tensor cond = gt(random({5, 7}), 0.0), xc = x.cuda();
  expect_same(xc * s, x * s, "mul");
  expect_same(s - xc, s - x, "sub");
  expect_same(where(cond.cuda(), xc, s), where(cond, x, s), "where");
  auto f = compile([](const Tensor& a, const Tensor& b) { return (a * b).sin() + b; });
  expect_same(f(xc, s), (x * s).sin() + s, "compiled");
  Tensor sg = s.clone().requires_grad_(), xg = xc.clone().requires_grad_();
  (xg * sg).sum().backward();
  ASSERT_TRUE(sg.grad().defined());
  EXPECT_EQ(sg.grad().device(), kCPU);
  EXPECT_NEAR(sg.grad().item<double>(), x.sum().item<double>(), 1e-4);
  expect_same(xg.grad(), ones({5, 7}) * s, "the GPU operand's gradient");
  EXPECT_COIL_ERROR(xc + random({7}), "one device");
}

// A training step on the GPU: eager autograd, and the compiled step (joint graph, partition,
// both halves compiled for the GPU), against the CPU's eager gradients.
TEST(Cuda, TrainingStepsMatchTheCpu) {
  COIL_REQUIRE_GPU();
  auto loss_of = [](const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2) {
    Tensor h = gelu(linear(x, w1, b1));
    return (linear(h, w2) * linear(h, w2)).mean();
  };
  manual_seed(11);
  std::vector<Tensor> host = {random({16, 32}), random({64, 32}), random({64}), random({8, 64})};
  auto grads_of = [&](auto&& f, Device device) {
    std::vector<Tensor> in;
    for (size_t i = 0; i < host.size(); ++i) {
      Tensor t = host[i].detach().to(device);  // a leaf of its own on either device
      if (i > 0) t.requires_grad_();
      in.push_back(t);
    }
    Tensor loss = f(in[0], in[1], in[2], in[3]);
    loss.backward();
    std::vector<Tensor> out = {loss};
    for (size_t i = 1; i < in.size(); ++i) out.push_back(in[i].grad());
    return out;
  };
  std::vector<Tensor> want = grads_of(loss_of, kCPU);
  std::vector<Tensor> eager = grads_of(loss_of, kCUDA);
  std::vector<Tensor> compiled = grads_of(compile(loss_of), kCUDA);
  for (size_t i = 0; i < want.size(); ++i) {
    expect_same(eager[i], want[i], "eager, " + std::to_string(i), 1e-4);
    expect_same(compiled[i], want[i], "compiled, " + std::to_string(i), 1e-4);
  }
}
