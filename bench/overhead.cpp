// Per-call overhead of coil::compile'd functions: the guard check and the whole call, next to
// the eager op. Run: ./build/bench/coil_bench_overhead
#include <benchmark/benchmark.h>
#include <coil/coil.h>

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

}  // namespace

BENCHMARK_MAIN();
