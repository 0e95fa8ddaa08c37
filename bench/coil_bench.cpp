// coil-bench: the workloads of TARGETS.md, eager and compiled, next to the machine's own
// ceilings (copy bandwidth, BLAS rate) measured at start-up. Prints a table and writes JSON.
//
//   coil-bench [--size cpu|gpu] [--device cpu|cuda] [--threads N] [--filter [=]NAME] [--json FILE]
//              [--reps N] [--dynamic] [--tf32 off|defaults|on] [--mode reduce-overhead]
//              [--dtype bf16|fp16]
//              [--amp]
//
// --dynamic compiles every workload with dynamic=true: its graph over size symbols, its kernels
// taking their sizes at run time (docs/dynamic.md), and compares it with the static graph: the
// two called in turns in the same process ("dynamic / static"), so that a shared machine's
// drift moves both alike. --mode
// compiles them in another mode than "default" (reduce-overhead: CUDA graphs, docs/cuda.md).
// --tf32 says whether float32 products and convolutions on the GPU may use TF32: off (the
// default here, full precision on both), defaults (coil's and PyTorch's: convolutions only) or
// on (both); the report says which was used. --dtype makes every input (and
// train_mlp's model) bfloat16 or float16; with --amp they stay float32 and each call runs under
// autocast in that dtype. A 16-bit compiled result may differ from eager's by the roundings
// eager makes after every op (as Inductor's does), so the check allows more there.
//
// With --device cuda the workloads run on the GPU at their GPU sizes; each timed call is timed
// to the end of its GPU work (the host waits for the device), and the ceilings are the GPU's:
// the driver's dense copy (what coil's copy_ calls) over 1 GiB and cuBLASLt's 4096^3
// product. On the GPU a call's device time is measured too ("device ms": CUDA events around it,
// the call queued behind a write of 256 MB that empties the L2 cache and keeps the GPU busy
// while the host queues the call, as Triton's benchmarks do): its kernels and the gaps between
// them, without the host's launch and wait. "of roof" is then the device time's share.
//
// Times are medians after warm-up, with inputs rotated across several copies so that small
// workloads do not run from a warm cache. Every run checks the compiled result against eager;
// a mismatch fails the run. The first call is timed with an empty compile cache, and again in
// new processes that find the caches warm (the median of five). "of lib" compares a matmul-bound
// workload with the library's own products at its shapes, the two timed in turns.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include <coil/cuda.h>

#include "timeline.h"
#include "workloads.h"

using namespace coil;
using namespace coil::bench;

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Options {
  bool gpu = false;      // the GPU sizes
  Device device = kCPU;  // where the workloads run (--device cuda: the GPU, at GPU sizes)
  int threads = 0;
  std::string filter, json, probe;
  std::string trace;  // --trace FILE: the GPU timeline of a few calls of each workload
  int reps = 0;       // 0: as many as fit in about half a second
  bool dynamic = false;
  std::string tf32 = "off";  // --tf32: off, defaults (convolutions only) or on
  std::string mode = "default";
  DType dtype = kFloat32;  // --dtype
  bool amp = false;        // --amp: autocast in `dtype`, inputs float32
};

DType parse_dtype(const std::string& s) {
  if (s == "bf16" || s == "bfloat16") return kBFloat16;
  if (s == "fp16" || s == "float16") return kFloat16;
  if (s == "fp32" || s == "float32") return kFloat32;
  std::cerr << "coil-bench: --dtype takes bf16, fp16 or fp32, not " << s << "\n";
  std::exit(2);
}

// The largest difference of a compiled result from eager's, relative to eager's largest value.
double tolerance(DType t) { return t == kBFloat16 ? 5e-2 : t == kFloat16 ? 1e-2 : 1e-3; }

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "coil-bench: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--size") {
      o.gpu = next() == "gpu";
    } else if (a == "--device") {
      o.device = Device(next());
      if (o.device.is_cuda()) o.gpu = true;
    } else if (a == "--threads")
      o.threads = std::stoi(next());
    else if (a == "--filter")
      o.filter = next();
    else if (a == "--json")
      o.json = next();
    else if (a == "--reps")
      o.reps = std::stoi(next());
    else if (a == "--probe")
      o.probe = next();
    else if (a == "--dynamic")
      o.dynamic = true;
    else if (a == "--tf32")
      o.tf32 = next();
    else if (a == "--mode")
      o.mode = next();
    else if (a == "--trace")
      o.trace = next();
    else if (a == "--dtype")
      o.dtype = parse_dtype(next());
    else if (a == "--amp")
      o.amp = true;
    else {
      std::cerr << "usage: coil-bench [--size cpu|gpu] [--device cpu|cuda] [--threads N] "
                   "[--filter [=]NAME] [--json FILE] "
                   "[--reps N] [--dynamic] [--tf32 off|defaults|on] [--mode reduce-overhead] "
                   "[--trace FILE] "
                   "[--dtype bf16|fp16] [--amp]\n";
      std::exit(2);
    }
  }
  return o;
}

// Waits for the GPU's work, where the workloads run there: a GPU call is timed to its end.
bool g_on_gpu = false;
void sync() {
  if (g_on_gpu) cuda::synchronize();
}

// The GPU's ceilings: a large dense copy (the driver's device-to-device copy, which coil's copy_
// calls: bytes read + written per second, over 1 GiB so the synchronisation is noise) and the
// float32 product rate of cuBLASLt on a 4096^3 product.
double gpu_copy_bandwidth() {
  const int64_t n = 128 << 20;
  Tensor a = ones({n}, kFloat32, kCUDA), b = empty({n}, kFloat32, kCUDA);
  double best = 1e30;
  for (int r = 0; r < 15; ++r) {
    sync();
    auto t0 = Clock::now();
    b.copy_(a);
    sync();
    best = std::min(best, ms_since(t0));
  }
  return 2.0 * n * sizeof(float) / (best * 1e-3);
}
double gpu_matmul_rate() {
  const int64_t n = 4096;
  Tensor a = randn({n, n}).to(bench_dtype()).cuda(), b = randn({n, n}).to(bench_dtype()).cuda();
  double best = 1e30;
  for (int r = 0; r < 7; ++r) {
    sync();
    auto t0 = Clock::now();
    mm(a, b);
    sync();
    best = std::min(best, ms_since(t0));
  }
  return 2.0 * n * n * n / (best * 1e-3);
}

// The ceilings are the best of several runs (what the machine can do), not the median: the
// first runs of a fresh process also pay for memory the system hands out lazily.
// Bytes read + written by a large parallel copy, per second.
double copy_bandwidth() {
  const int64_t n = 32 << 20;
  std::vector<float> a(static_cast<size_t>(n), 1.0f), b(static_cast<size_t>(n));
  double best = 1e30;
  for (int r = 0; r < 15; ++r) {
    auto t0 = Clock::now();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) b[static_cast<size_t>(i)] = a[static_cast<size_t>(i)];
    best = std::min(best, ms_since(t0));
  }
  return 2.0 * n * sizeof(float) / (best * 1e-3);
}

// float32 matrix product rate of the library coil calls (oneDNN), on a 2048^3 product.
double matmul_rate() {
  const int64_t n = 2048;
  Tensor a = randn({n, n}).to(bench_dtype()), b = randn({n, n}).to(bench_dtype());
  double best = 1e30;
  for (int r = 0; r < 7; ++r) {
    auto t0 = Clock::now();
    mm(a, b);
    best = std::min(best, ms_since(t0));
  }
  return 2.0 * n * n * n / (best * 1e-3);
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

// Whether call r (from 0) of a timing loop runs: `reps` of them when given, else at least 5 and
// up to 1000 until `budget_ms` has passed since `start`.
bool more_calls(int r, int reps, Clock::time_point start, double budget_ms) {
  return reps ? r < reps : (r < 5 || (ms_since(start) < budget_ms && r < 1000));
}

// Median per-call time of f over rotated input sets.
double time_ms(const std::function<Tensor(const std::vector<Tensor>&)>& f,
               const std::vector<std::vector<Tensor>>& sets, int reps) {
  for (int w = 0; w < 3; ++w) f(sets[static_cast<size_t>(w) % sets.size()]);
  sync();
  std::vector<double> t;
  auto start = Clock::now();
  for (int r = 0; more_calls(r, reps, start, 500); ++r) {
    auto t0 = Clock::now();
    f(sets[static_cast<size_t>(r) % sets.size()]);
    sync();
    t.push_back(ms_since(t0));
  }
  return median(t);
}

// Median device time of f per call (the GPU only; see the header).
double device_ms(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                 const std::vector<std::vector<Tensor>>& sets, int reps) {
  for (int w = 0; w < 3; ++w) f(sets[static_cast<size_t>(w) % sets.size()]);
  Tensor flush = empty({64 << 20}, kFloat32, bench_device());
  std::vector<std::pair<cuda::Event, cuda::Event>> marks;
  auto start = Clock::now();
  for (int r = 0; more_calls(r, reps, start, 500); ++r) {
    flush.zero_();
    marks.emplace_back(cuda::Event(true), cuda::Event(true));
    marks.back().first.record();
    f(sets[static_cast<size_t>(r) % sets.size()]);
    marks.back().second.record();
  }
  sync();
  std::vector<double> t;
  for (const auto& [a, b] : marks) t.push_back(a.elapsed_time(b));
  return median(t);
}

// The median times (on the GPU, device times) of programs called in turns, call by call, so
// that a shared machine's drift from second to second moves them alike. Consecutive calls read
// different input sets: a program called right after another on the same inputs found them in
// the cache (a static instance_norm "took" 1.6x its dynamic twin's time, on 2 cores).
std::vector<double> medians_in_turns(const std::vector<Program>& fs,
                                     const std::vector<std::vector<Tensor>>& sets, int reps) {
  for (const Program& f : fs)
    for (int w = 0; w < 3; ++w) f(sets[static_cast<size_t>(w) % sets.size()]);
  sync();
  Tensor flush = g_on_gpu ? empty({64 << 20}, kFloat32, bench_device()) : Tensor();
  std::vector<std::vector<double>> t(fs.size());
  auto start = Clock::now();
  for (int r = 0; more_calls(r, reps, start, 1000); ++r)
    for (size_t k = 0; k < fs.size(); ++k) {
      const std::vector<Tensor>& in = sets[(static_cast<size_t>(r) * fs.size() + k) % sets.size()];
      if (g_on_gpu) {
        flush.zero_();
        cuda::Event a(true), b(true);
        a.record();
        fs[k](in);
        b.record();
        b.synchronize();
        t[k].push_back(a.elapsed_time(b));
      } else {
        auto t0 = Clock::now();
        fs[k](in);
        t[k].push_back(ms_since(t0));
      }
    }
  std::vector<double> out;
  for (const std::vector<double>& v : t) out.push_back(median(v));
  return out;
}

// The library's own time for a workload's products at their shapes, each called alone on
// contiguous operands (what the compiled program's matmuls cannot beat), against the compiled
// program's: the two take turns call by call, each over its own rotated inputs (as many copies
// for the products as the workload has), so that a shared machine's drift from second to
// second moves both. Returns {compiled, library}: the compiled call's median and the sum of
// the products' medians.
std::pair<double, double> library_in_turns(
    const std::function<Tensor(const std::vector<Tensor>&)>& f,
    const std::vector<std::vector<Tensor>>& sets, const std::vector<Product>& products, int reps) {
  std::vector<std::vector<std::vector<Tensor>>> operands(products.size());
  for (size_t p = 0; p < products.size(); ++p)
    for (size_t i = 0; i < sets.size(); ++i) {
      const Product& x = products[p];
      // In the products' dtype: the inputs', or autocast's.
      auto make = [](const Shape& s) { return randn(s).to(bench_dtype()).to(bench_device()); };
      operands[p].push_back(
          x.batch > 1 ? std::vector<Tensor>{make({x.batch, x.m, x.k}), make({x.batch, x.k, x.n})}
                      : std::vector<Tensor>{make({x.m, x.k}), make({x.k, x.n})});
    }
  std::vector<double> compiled;
  std::vector<std::vector<double>> library(products.size());
  auto start = Clock::now();
  for (int r = -3; r < 0 || more_calls(r, reps, start, 1000); ++r) {  // 3 untimed first
    const size_t i = static_cast<size_t>(r + 3) % sets.size();
    auto t0 = Clock::now();
    f(sets[i]);
    sync();
    if (r >= 0) compiled.push_back(ms_since(t0));
    for (size_t p = 0; p < products.size(); ++p) {
      t0 = Clock::now();
      matmul(operands[p][i][0], operands[p][i][1]);
      sync();
      if (r >= 0) library[p].push_back(ms_since(t0));
    }
  }
  double lib = 0;
  for (const std::vector<double>& t : library) lib += median(t);
  return {median(compiled), lib};
}

double bytes_of(const std::vector<Tensor>& in, const Tensor& out) {
  double b = static_cast<double>(out.numel() * out.element_size());
  for (const Tensor& t : in) b += static_cast<double>(t.numel() * t.element_size());
  return b;
}

// max |got - want| relative to max |want|.
double mismatch(const Tensor& got, const Tensor& want) {
  if (got.sizes() != want.sizes()) return INFINITY;
  std::vector<double> g = got.to_vector_double(), w = want.to_vector_double();
  double err = 0, scale = 1e-30;
  for (size_t i = 0; i < g.size(); ++i) {
    err = std::max(err, std::fabs(g[i] - w[i]));
    scale = std::max(scale, std::fabs(w[i]));
  }
  return err / scale;
}

// New processes that only make the first call: the warm-cache compile time, the median of five
// (one new process's time varies with what the machine's memory and page cache hold; on the
// shared device, mlp's ranged over 15-46 ms with nothing changed).
double warm_first_call_ms(const std::string& name, const Options& o) {
  std::string cmd = "'/proc/" + std::to_string(getpid()) + "/exe' --probe " + name + " --size " +
                    (o.gpu ? "gpu" : "cpu") + " --device " + o.device.str() +
                    (o.threads ? " --threads " + std::to_string(o.threads) : "") +
                    (o.dynamic ? " --dynamic" : "") + " --tf32 " + o.tf32 + " --mode " + o.mode +
                    " --dtype " + dtype_name(o.dtype) + (o.amp ? " --amp" : "");
  std::vector<double> times;
  for (int i = 0; i < 5; ++i) {
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return NAN;
    double ms = NAN;
    if (std::fscanf(p, "%lf", &ms) != 1) ms = NAN;
    pclose(p);
    if (std::isnan(ms)) return NAN;
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

const Workload* find(const std::vector<Workload>& ws, const std::string& name) {
  for (const Workload& w : ws)
    if (w.name == name) return &w;
  return nullptr;
}

int probe(const Options& o) {
  std::vector<Workload> ws = workloads();
  const Workload* w = find(ws, o.probe);
  if (!w) return 2;
  std::vector<Tensor> in = w->inputs(o.gpu);
  Program cf = w->compiled(o.gpu);
  auto t0 = Clock::now();
  cf(in);
  sync();
  std::printf("%.3f\n", ms_since(t0));
  if (std::getenv("COIL_BENCH_PROBE_MORE")) {
    for (int i = 0; i < 3; ++i) {
      auto t1 = Clock::now();
      cf(in);
      std::fprintf(stderr, "call %d: %.3f ms\n", i + 2, ms_since(t1));
    }
  }
  return 0;
}

int run_bench(int argc, char** argv) {
  Options o = parse(argc, argv);
  if (o.threads) omp_set_num_threads(o.threads);
  use_device(o.device);
  use_dynamic_shapes(o.dynamic);
  use_mode(o.mode);
  use_precision(o.dtype, o.amp);
  if (o.tf32 != "off" && o.tf32 != "defaults" && o.tf32 != "on") {
    std::fprintf(stderr, "coil-bench: --tf32 takes off, defaults or on, not %s\n", o.tf32.c_str());
    return 1;
  }
  cuda::set_matmul_allow_tf32(o.tf32 == "on");
  cuda::set_cudnn_allow_tf32(o.tf32 != "off");
  g_on_gpu = o.device.is_cuda();
  if (!o.probe.empty()) return probe(o);

  // An empty compile cache of our own, so that first calls compile.
  char dir[] = "/tmp/coil-bench-cache-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  setenv("COIL_CACHE_DIR", dir, 1);

  const bool gpu = o.device.is_cuda();
  double bw = gpu ? gpu_copy_bandwidth() : copy_bandwidth();
  double blas = gpu ? gpu_matmul_rate() : matmul_rate();
  std::printf(
      "coil-bench: %s, %d cores, %d threads; copy %.1f GB/s, matmul %.1f GFLOP/s "
      "(%s %s^3)%s; mode %s; TF32 %s; %s%s\n",
      gpu ? (cuda::device_name(o.device.index) + " (" + o.device.str() + ")").c_str()
          : cpu_model().c_str(),
      omp_get_num_procs(), omp_get_max_threads(), bw / 1e9, blas / 1e9, dtype_name(o.dtype),
      gpu ? "4096" : "2048", o.dynamic ? "; dynamic shapes" : "", o.mode.c_str(),
      o.tf32 == "defaults" ? "for convolutions" : o.tf32.c_str(), dtype_name(o.dtype),
      o.amp ? " under autocast" : "");
  std::printf("%-15s %10s %10s %8s %10s %10s %7s %7s %7s %11s %11s %6s\n", "workload", "eager ms",
              "coil ms", "speedup", "device ms", "roofline", "of roof", "of lib", "kernels",
              "first cold", "first warm", "check");
  nlohmann::json report = {{"cpu", cpu_model()},
                           {"device", o.device.str()},
                           {"threads", omp_get_max_threads()},
                           {"copy_gbps", bw / 1e9},
                           {"blas_gflops", blas / 1e9},
                           {"size", o.gpu ? "gpu" : "cpu"},
                           {"dynamic", o.dynamic},
                           {"mode", o.mode},
                           {"tf32", o.tf32},
                           {"dtype", dtype_name(o.dtype)},
                           {"amp", o.amp},
                           {"workloads", nlohmann::json::array()}};
  bool ok = true;
  for (const Workload& w : workloads()) {
    // --filter NAME: the workloads whose name holds NAME; --filter =NAME: that one alone.
    if (o.filter.rfind('=', 0) == 0 ? w.name != o.filter.substr(1)
                                    : w.name.find(o.filter) == std::string::npos)
      continue;
    std::vector<Tensor> first = w.inputs(o.gpu);
    Program eager_fn = w.eager(o.gpu);
    Tensor want = eager_fn(first);
    double bytes = bytes_of(first, want);
    // Enough copies of the inputs that the set rotated through exceeds the last-level cache.
    size_t copies = static_cast<size_t>(std::clamp(std::ceil(64e6 / bytes), 1.0, 8.0));
    std::vector<std::vector<Tensor>> sets = {first};
    while (sets.size() < copies) sets.push_back(w.inputs(o.gpu));

    Program cf = w.compiled(o.gpu);
    auto before = counters();
    sync();
    auto t0 = Clock::now();
    Tensor got = cf(first);
    sync();
    double cold = ms_since(t0);
    int64_t kernels = counters()["generated_kernels"] - before["generated_kernels"];
    double err = mismatch(got, want);
    bool good = err <= tolerance(o.dtype);
    ok = ok && good;

    double eager = time_ms(eager_fn, sets, o.reps);
    double compiled = time_ms(cf, sets, o.reps);
    double device = gpu ? device_ms(cf, sets, o.reps) : NAN;
    std::vector<Product> products = workload_products(w.name, first);
    double flops = 0;
    for (const Product& p : products) flops += p.flops();
    double roof = (w.matmul_bound ? flops / blas : bytes / bw) * 1e3;
    auto [in_turns, lib] = w.matmul_bound ? library_in_turns(cf, sets, products, o.reps)
                                          : std::pair<double, double>{NAN, NAN};
    double warm = warm_first_call_ms(w.name, o);
    // --dynamic: the static graph beside it, in turns (its result checked too).
    double static_turn = NAN, dynamic_turn = NAN;
    if (o.dynamic) {
      use_dynamic_shapes(false);
      Program static_fn = w.compiled(o.gpu);
      use_dynamic_shapes(true);
      const double static_err = mismatch(static_fn(first), want);
      good = good && static_err <= tolerance(o.dtype);
      ok = ok && good;
      const std::vector<double> t = medians_in_turns({static_fn, cf}, sets, o.reps);
      static_turn = t[0];
      dynamic_turn = t[1];
    }
    const double timed = gpu ? device : compiled;  // what "of roof" compares
    std::printf(
        "%-15s %10.3f %10.3f %7.2fx %10.3f %10.3f %6.0f%% %6.0f%% %7lld %9.1fms %9.1fms %6s\n",
        w.name.c_str(), eager, compiled, eager / compiled, device, roof, 100 * roof / timed,
        100 * lib / in_turns, static_cast<long long>(kernels), cold, warm, good ? "ok" : "FAIL");
    if (gpu && !o.trace.empty()) trace_calls(cf, sets, o.trace + "." + w.name + ".json");
    if (o.dynamic)
      std::printf("%-15s dynamic / static, in turns%s: %.3f / %.3f ms = %.2f\n", "",
                  gpu ? " (device time)" : "", dynamic_turn, static_turn,
                  dynamic_turn / static_turn);
    auto or_null = [](double x) { return std::isnan(x) ? nlohmann::json() : nlohmann::json(x); };
    report["workloads"].push_back({{"name", w.name},
                                   {"program", w.program},
                                   {"eager_ms", eager},
                                   {"compiled_ms", compiled},
                                   {"speedup", eager / compiled},
                                   {"roofline_ms", roof},
                                   {"device_ms", or_null(device)},
                                   {"roofline_fraction", roof / compiled},
                                   {"device_roofline_fraction", or_null(roof / device)},
                                   {"bound", w.matmul_bound ? "blas" : "memory"},
                                   {"library_ms", or_null(lib)},
                                   {"compiled_in_turns_ms", or_null(in_turns)},
                                   {"dynamic_in_turns_ms", or_null(dynamic_turn)},
                                   {"static_in_turns_ms", or_null(static_turn)},
                                   {"kernels", kernels},
                                   {"first_call_cold_ms", cold},
                                   {"first_call_warm_new_process_ms", warm},
                                   {"max_rel_error", err},
                                   {"ok", good}});
    if (w.make) {  // a training step: what the partitioner saved for the backward
      auto after = counters();
      int64_t saved = after["saved_bytes"] - before["saved_bytes"],
              all = after["save_all_bytes"] - before["save_all_bytes"];
      std::printf(
          "%-15s partitioner: saves %lld bytes for the backward (saving every value it "
          "reads: %lld)\n",
          "", static_cast<long long>(saved), static_cast<long long>(all));
      report["workloads"].back()["saved_bytes"] = saved;
      report["workloads"].back()["save_all_bytes"] = all;
    }
  }
  if (!o.json.empty()) std::ofstream(o.json) << report.dump(2) << "\n";
  std::filesystem::remove_all(dir);
  if (!ok) std::fprintf(stderr, "coil-bench: a compiled result differs from eager\n");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run_bench(argc, argv);
  } catch (const std::exception& e) {  // coil::Error, and an InternalError (a bug) too
    std::fprintf(stderr, "coil-bench: %s\n", e.what());
    return 1;
  }
}
