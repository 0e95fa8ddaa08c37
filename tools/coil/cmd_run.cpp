// coil run: the graph compiled (compile_fx, the whole pipeline) and interpreted (the eager
// reference) on the same random inputs: how far apart the results are, and how fast each is.
#include <coil/coil.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "compile/compile_fx.h"
#include "commands.h"
#include "graph/interpreter.h"
#include "graph/printer.h"
#include "graph_file.h"
#include "backends/cpu/cpp_compiler.h"
#include "runtime/tensor_impl.h"
#include "text.h"

namespace coil::tool {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The median time of `reps` calls of `f`, after one call to warm caches and allocators.
template <typename F>
double median_ms(int64_t reps, F&& f) {
  f();
  std::vector<double> times;
  for (int64_t i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    f();
    times.push_back(ms_since(t0));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// How far the compiled result is from eager's: the largest absolute error, the largest error
// relative to the largest eager magnitude, and the elements outside the dtype's tolerance.
struct Difference {
  double max_abs = 0, max_rel = 0;
  int64_t bad = 0;
};

// 16-bit floats compute in float32 between load and store in both, but round differently.
double tolerance(DType t) {
  switch (t) {
    case kFloat16:
      return 1e-2;
    case kBFloat16:
      return 5e-2;
    case kFloat32:
      return 1e-4;
    case kFloat64:
      return 1e-10;
    default:
      return 0;  // integers and bools are exact
  }
}

Difference compare(const Tensor& got, const Tensor& want) {
  std::vector<double> a = got.to_vector_double(), b = want.to_vector_double();
  Difference d;
  double scale = 0;
  for (double v : b)
    if (std::isfinite(v)) scale = std::max(scale, std::fabs(v));
  double tol = tolerance(want.dtype());
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::isinf(b[i]) && a[i] == b[i]) continue;
    double err = std::fabs(a[i] - b[i]);
    if (std::isnan(err)) err = INFINITY;  // a NaN on one side only
    d.max_abs = std::max(d.max_abs, err);
    if (err > tol * (1 + std::fabs(b[i]))) ++d.bad;
  }
  d.max_rel = scale > 0 ? d.max_abs / scale : d.max_abs;
  return d;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

int run_run(const Args& args) {
  int64_t seed = args.count("--seed", 0), reps = std::max<int64_t>(args.count("--reps", 10), 1);
  std::string name = graph_name(args.file);
  RunnableGraph rg = load_runnable_graph(args.file, static_cast<uint64_t>(seed));
  auto graph = std::make_shared<const Graph>(std::move(rg.graph));
  const std::vector<Tensor>& inputs = rg.inputs;

  std::cout << "coil run " << args.file << ": seed " << seed << ", " << reps << " timed calls\n";
  for (size_t i = 0; i < inputs.size(); ++i)
    std::cout << "  input " << graph->placeholders()[i]->name() << ": "
              << meta_str(meta_of(inputs[i])) << "\n";

  // The whole pipeline, as the first call of a compiled function runs it.
  std::map<std::string, int64_t> counts_before = counters();
  jit::JitStats jit_before = jit::stats();
  CompileOptions options;
  options.name = name;
  options.options["async_compile"] = false;  // the compile below includes the compiler's run
  auto t0 = Clock::now();
  capture::CompiledGraph compiled = compile_fx(graph, options, name);
  double compile_ms = ms_since(t0);
  std::map<std::string, int64_t> counts = counters();
  jit::JitStats jit_after = jit::stats();
  const char* jit = jit_after.compiles > jit_before.compiles         ? "C++ compiler ran"
                    : jit_after.disk_hits > jit_before.disk_hits     ? "code cache hit on disk"
                    : jit_after.memory_hits > jit_before.memory_hits ? "code cache hit in memory"
                                                                     : "nothing to compile";
  std::cout << "compile: " << fmt("%.1f", compile_ms) << " ms ("
            << plural(counts["generated_kernels"] - counts_before["generated_kernels"], "kernel")
            << ", " << plural(counts["extern_calls"] - counts_before["extern_calls"], "extern call")
            << "; " << jit << ")\n";

  std::vector<Tensor> want = interpret(*graph, inputs);
  std::vector<Tensor> got = compiled.run(inputs);
  bool ok = got.size() == want.size();
  std::cout << "output  meta                          max abs err  max rel err\n";
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    std::string meta = meta_str(meta_of(want[i]));
    if (got[i].sizes() != want[i].sizes() || got[i].dtype() != want[i].dtype()) {
      std::cout << "  " << i << "     " << meta << "  compiled result is "
                << meta_str(meta_of(got[i])) << "\n";
      ok = false;
      continue;
    }
    Difference d = compare(got[i], want[i]);
    ok = ok && d.bad == 0;
    meta.resize(std::max<size_t>(meta.size(), 28), ' ');
    std::cout << "  " << i << "     " << meta << "  " << fmt("%-11.3g", d.max_abs) << "  "
              << fmt("%-11.3g", d.max_rel)
              << (d.bad ? "  " + std::to_string(d.bad) + " elements beyond tolerance" : "  ok")
              << "\n";
  }

  double eager_ms = median_ms(reps, [&] { interpret(*graph, inputs); });
  double compiled_ms = median_ms(reps, [&] { compiled.run(inputs); });
  std::cout << "time per call (median of " << reps << "): eager " << fmt("%.4f", eager_ms)
            << " ms, compiled " << fmt("%.4f", compiled_ms) << " ms ("
            << fmt("%.2f", eager_ms / std::max(compiled_ms, 1e-9)) << "x)\n";
  if (!ok)
    throw Error(
        "coil run: the compiled results differ from eager's beyond the tolerance "
        "(the table above says which)");
  return 0;
}

}  // namespace

Command run_command() {
  return {"run",
          "compile a graph and run it against the eager interpreter on random inputs",
          "coil run FILE [--seed N] [--reps N]",
          "Draws random inputs of the placeholders' dtypes, sizes and strides (and random values\n"
          "for parameters) from the seed, compiles the graph with the whole pipeline\n"
          "(compile_fx, as the first call of a compiled function does), runs it and the eager\n"
          "interpreter (src/graph/interpreter.h) on the same inputs and prints, per output, the\n"
          "largest absolute error and the largest error relative to the largest eager\n"
          "magnitude; then the median time per call of both. Exits with 1 when an output\n"
          "differs beyond its dtype's tolerance.",
          {{"--seed", "N", "seed of the random inputs (default 0)"},
           {"--reps", "N", "timed calls of each (default 10)"}},
          run_run};
}

}  // namespace coil::tool
