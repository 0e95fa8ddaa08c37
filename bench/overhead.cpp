// Per-call overhead of coil::compile'd functions: the guard check and the whole call, next to
// the eager op. Run: ./build/bench/coil_bench_overhead
#include <benchmark/benchmark.h>
#include <coil/coil.h>
#include <coil/cuda.h>

namespace {

// A graph of one tiny op: what is left is coil's own cost per call.
void BM_EagerAddOne(benchmark::State& state) {
  coil::Tensor x = coil::randn({8});
  for (auto _ : state) benchmark::DoNotOptimize(x + 1);
}
BENCHMARK(BM_EagerAddOne);

void BM_CompiledAddOne(benchmark::State& state) {
  auto cf = coil::compile([](const coil::Tensor& x) { return x + 1; });
  coil::Tensor x = coil::randn({8});
  cf(x);
  for (auto _ : state) benchmark::DoNotOptimize(cf(x));
}
BENCHMARK(BM_CompiledAddOne);

// Three tensor inputs, the first returned unchanged: the call is guards plus bookkeeping.
void BM_CompiledIdentity3Inputs(benchmark::State& state) {
  auto cf = coil::compile(
      [](const coil::Tensor& a, const coil::Tensor& b, const coil::Tensor& c) { return a; });
  coil::Tensor a = coil::randn({8, 8}), b = coil::randn({8}), c = coil::randn({2, 3, 4});
  cf(a, b, c);
  for (auto _ : state) benchmark::DoNotOptimize(cf(a, b, c));
}
BENCHMARK(BM_CompiledIdentity3Inputs);

// The same over size symbols (dynamic=true): the guards bind every dim's symbol, check the
// strides as expressions of the sizes, then the env's relations.
void BM_CompiledIdentity3InputsDynamic(benchmark::State& state) {
  auto cf = coil::compile(
      [](const coil::Tensor& a, const coil::Tensor& b, const coil::Tensor& c) { return a; },
      {.dynamic = true});
  coil::Tensor a = coil::randn({8, 8}), b = coil::randn({8}), c = coil::randn({2, 3, 4});
  cf(a, b, c);
  for (auto _ : state) benchmark::DoNotOptimize(cf(a, b, c));
}
BENCHMARK(BM_CompiledIdentity3InputsDynamic);

// One kernel over a symbolic size: the wrapper reads the size and allocates per call.
void BM_CompiledAddOneDynamic(benchmark::State& state) {
  auto cf = coil::compile([](const coil::Tensor& x) { return x + 1; }, {.dynamic = true});
  coil::Tensor x = coil::randn({8});
  cf(x);
  for (auto _ : state) benchmark::DoNotOptimize(cf(x));
}
BENCHMARK(BM_CompiledAddOneDynamic);

// An eager op on the GPU: the host's cost of one launch (kernels queue on coil's stream; the
// loop waits for the GPU only at its end), for a new tensor per call and for an in-place one.
void BM_EagerAddOneCuda(benchmark::State& state) {
  if (!coil::cuda::is_available()) return state.SkipWithError("no GPU");
  coil::Tensor x = coil::randn({1024}).cuda();
  coil::Tensor warm = x + 1;
  for (auto _ : state) benchmark::DoNotOptimize(x + 1);
  coil::cuda::synchronize();
}
BENCHMARK(BM_EagerAddOneCuda);

// A new size on every call: with eager ops' dynamic graphs none of these compiles (each call is
// the steady-state cost plus a size pattern lookup); with a graph per shape, each would.
void BM_EagerAddOneNewSizeEachCallCuda(benchmark::State& state) {
  if (!coil::cuda::is_available()) return state.SkipWithError("no GPU");
  coil::Tensor warm = coil::randn({1024}).cuda() + 1;
  int64_t n = 2000;
  for (auto _ : state) {
    state.PauseTiming();
    coil::Tensor x = coil::randn({n++}).cuda();
    coil::cuda::synchronize();
    state.ResumeTiming();
    benchmark::DoNotOptimize(x + 1);
  }
  coil::cuda::synchronize();
}
BENCHMARK(BM_EagerAddOneNewSizeEachCallCuda)->Iterations(40);

void BM_EagerInPlaceMulCuda(benchmark::State& state) {
  if (!coil::cuda::is_available()) return state.SkipWithError("no GPU");
  coil::Tensor x = coil::randn({1024}).cuda();
  x.mul_(1.0);
  for (auto _ : state) x.mul_(1.0);
  coil::cuda::synchronize();
}
BENCHMARK(BM_EagerInPlaceMulCuda);

// A matrix product through cuBLASLt, eager: the library call's host cost.
void BM_EagerMatmulCuda(benchmark::State& state) {
  if (!coil::cuda::is_available()) return state.SkipWithError("no GPU");
  coil::Tensor a = coil::randn({64, 64}).cuda();
  coil::Tensor warm = coil::matmul(a, a);
  for (auto _ : state) benchmark::DoNotOptimize(coil::matmul(a, a));
  coil::cuda::synchronize();
}
BENCHMARK(BM_EagerMatmulCuda);

// 64 MiB to the GPU from pageable and from pinned memory (waiting for each copy): bandwidth.
void copy_to_cuda(benchmark::State& state, bool pinned) {
  if (!coil::cuda::is_available()) return state.SkipWithError("no GPU");
  coil::Tensor x = coil::randn({16 << 20});
  if (pinned) x = x.pin_memory();
  coil::cuda::synchronize();
  for (auto _ : state) {
    coil::Tensor y = x.cuda(0, /*non_blocking=*/true);
    coil::cuda::synchronize();
  }
  state.SetBytesProcessed(state.iterations() * x.numel() * 4);
}
void BM_CopyToCuda64MiBPageable(benchmark::State& state) { copy_to_cuda(state, false); }
void BM_CopyToCuda64MiBPinned(benchmark::State& state) { copy_to_cuda(state, true); }
BENCHMARK(BM_CopyToCuda64MiBPageable)->UseRealTime();
BENCHMARK(BM_CopyToCuda64MiBPinned)->UseRealTime();

void BM_CompiledAddOneCuda(benchmark::State& state) {
  if (!coil::cuda::is_available()) return state.SkipWithError("no GPU");
  auto cf = coil::compile([](const coil::Tensor& x) { return x + 1; });
  coil::Tensor x = coil::randn({1024}).cuda();
  cf(x);
  for (auto _ : state) benchmark::DoNotOptimize(cf(x));
  coil::cuda::synchronize();
}
BENCHMARK(BM_CompiledAddOneCuda);

// The same with mode="reduce-overhead": the input copied into the CUDA graph's static input, one
// graph launch.
void BM_CompiledAddOneCudaReduceOverhead(benchmark::State& state) {
  if (!coil::cuda::is_available()) return state.SkipWithError("no GPU");
  auto cf = coil::compile([](const coil::Tensor& x) { return x + 1; }, {.mode = "reduce-overhead"});
  coil::Tensor x = coil::randn({1024}).cuda();
  cf(x), cf(x);  // the warm-up, then the recording
  for (auto _ : state) benchmark::DoNotOptimize(cf(x));
  coil::cuda::synchronize();
}
BENCHMARK(BM_CompiledAddOneCudaReduceOverhead);

// With the input marked as a static address: no copy, the graph launch alone.
void BM_CompiledAddOneCudaReduceOverheadStaticInput(benchmark::State& state) {
  if (!coil::cuda::is_available()) return state.SkipWithError("no GPU");
  auto cf = coil::compile([](const coil::Tensor& x) { return x + 1; }, {.mode = "reduce-overhead"});
  coil::Tensor x = coil::randn({1024}).cuda();
  coil::mark_static_address(x);
  cf(x), cf(x);
  for (auto _ : state) benchmark::DoNotOptimize(cf(x));
  coil::cuda::synchronize();
}
BENCHMARK(BM_CompiledAddOneCudaReduceOverheadStaticInput);

// A small MLP (three products with bias and ReLU, a softmax): seven launches per call in the
// default mode, one graph launch with mode="reduce-overhead". Host time per call; the loop
// waits for the GPU only at its end.
void compiled_mlp_cuda(benchmark::State& state, const char* mode) {
  if (!coil::cuda::is_available()) return state.SkipWithError("no GPU");
  using coil::Tensor;
  Tensor w1 = coil::randn({256, 256}).cuda(), w2 = coil::randn({256, 256}).cuda();
  Tensor w3 = coil::randn({256, 64}).cuda(), b = coil::randn({256}).cuda();
  auto cf = coil::compile(
      [&](const Tensor& x) {
        Tensor h = coil::relu(coil::matmul(x, w1) + b);
        h = coil::relu(coil::matmul(h, w2) + b);
        return coil::softmax(coil::matmul(h, w3), -1);
      },
      {.mode = mode});
  Tensor x = coil::randn({32, 256}).cuda();
  cf(x), cf(x);
  for (auto _ : state) benchmark::DoNotOptimize(cf(x));
  coil::cuda::synchronize();
}
void BM_CompiledMlpCuda(benchmark::State& state) { compiled_mlp_cuda(state, "default"); }
void BM_CompiledMlpCudaReduceOverhead(benchmark::State& state) {
  compiled_mlp_cuda(state, "reduce-overhead");
}
BENCHMARK(BM_CompiledMlpCuda);
BENCHMARK(BM_CompiledMlpCudaReduceOverhead);

}  // namespace

BENCHMARK_MAIN();
