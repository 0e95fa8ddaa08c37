// coil-bench-models: the full-size models of coil::nn with random weights, eager and compiled:
// ResNet-50 inference (images/s) and a training step (SGD with momentum, batch norm in training
// mode); GPT-2 small forward (batch x tokens), a training step (AdamW) and greedy generation at
// batch 1 (tokens/s, the compiled decode step against the eager one). Prints a table and writes
// JSON for bench/compare_models.py, which runs the same models in PyTorch beside it.
//
//   coil-bench-models [--device cpu|cuda] [--model resnet50|gpt2] [--json FILE] [--mode MODE]
//                     [--quick] [--channels-last] [--amp bf16|fp16]
//
// --channels-last runs ResNet-50 converted with Module::to(MemoryFormat::ChannelsLast) on
// channels-last images (docs/memory_format.md). --amp runs each forward and loss under
// coil::autocast in that dtype (docs/amp.md): weights, gradients and optimizer states stay
// float32; an fp16 training step scales its loss with a GradScaler; generation stays float32.
// A compiled result may then differ from eager by a 16-bit rounding (eager rounds after every
// op), so the check allows 5e-2 instead of 1e-2.
//
// Times are medians of 3 calls after warm-up (2 with --quick); a GPU call
// is timed to the end of its work. The first compiled call is timed with an empty compile cache.
// Every compiled result is checked against eager: logits, the first training step's loss (later
// steps drift apart as float32 rounding grows through training), generated ids.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <coil/coil.h>
#include <coil/cuda.h>

using namespace coil;

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  Device device = kCPU;
  std::string model, json;
  std::string mode = "default";  // CompileOptions::mode of every compiled function
  bool quick = false;
  bool channels_last = false;  // ResNet-50 in MemoryFormat::ChannelsLast
  std::optional<DType> amp;    // autocast's dtype for forwards and losses
};

Device g_device = kCPU;
std::optional<DType> g_amp;

// `fn` under autocast where --amp asked for it.
Tensor under_amp(const std::function<Tensor()>& fn) {
  if (!g_amp) return fn();
  autocast guard(g_device.type, *g_amp);
  return fn();
}

void sync() {
  if (g_device.is_cuda()) cuda::synchronize();
}

double ms_of(const std::function<void()>& fn) {
  sync();
  auto t0 = Clock::now();
  fn();
  sync();
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The median of `reps` timed calls after `warmups` calls (the first one's time is returned in
// `first` when asked: for a compiled function, its first call). A training step warms up twice:
// the compiled optimizer step compiles on the second (the first creates the momentum buffers).
double median_ms(const std::function<void()>& fn, int reps, double* first = nullptr,
                 int warmups = 1) {
  double f = ms_of(fn);
  if (first) *first = f;
  for (int i = 1; i < warmups; ++i) ms_of(fn);
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) t.push_back(ms_of(fn));
  std::sort(t.begin(), t.end());
  // (Of an even count, the middle two's mean, as Python's statistics.median: compare_models.py
  // measures PyTorch's side so.)
  const size_t m = t.size() / 2;
  return t.size() % 2 ? t[m] : (t[m - 1] + t[m]) / 2;
}

// |a - b| / max(1, |b|) over the elements: compiled against eager.
double difference(const Tensor& a, const Tensor& b) {
  Tensor x = a.detach().cpu().to(kFloat64), y = b.detach().cpu().to(kFloat64);
  return amax(abs(sub(x, y))).item<double>() / std::max(1.0, amax(abs(y)).item<double>());
}

// GPU memory around one warm call: what was held before it (weights, optimizer states, and in
// this program the other side's model too) and the most the call added on top (activations,
// gradients, workspaces). Each side of a comparison holds different things before its call; the
// peak above what it holds is the call's own.
struct Memory {
  double held_mib = 0, peak_above_mib = 0;
};

struct Row {
  std::string name;
  double per_call_items;  // images (ResNet) or tokens (GPT-2) per call
  double eager_ms, compiled_ms, first_ms, diff;
  Memory memory;  // of the compiled call, on a GPU
};

// The memory around one more call of `fn` (warm: compiled, buffers made), as
// torch.cuda.memory_allocated before it and max_memory_allocated after reset_peak_memory_stats;
// zeros on the CPU.
Memory memory_of(const std::function<void()>& fn) {
  if (!g_device.is_cuda()) return {};
  sync();
  cuda::reset_peak_memory_stats(g_device.index);
  const int64_t held = cuda::memory_allocated(g_device.index);
  fn();
  sync();
  const int64_t peak = cuda::max_memory_allocated(g_device.index);
  return {static_cast<double>(held) / (1 << 20), static_cast<double>(peak - held) / (1 << 20)};
}

void print(const Row& r) {
  std::printf("%-22s %10.2f %10.2f %8.2fx %11.1f %11.1f %10.0f %9.1e\n", r.name.c_str(), r.eager_ms,
              r.compiled_ms, r.eager_ms / r.compiled_ms, r.per_call_items / r.eager_ms * 1e3,
              r.per_call_items / r.compiled_ms * 1e3, r.first_ms, r.diff);
  std::fflush(stdout);
}

// A forward, eager and compiled, compared by their outputs.
Row inference_row(std::string name, double items, int reps, const std::function<Tensor()>& eager,
                  const std::function<Tensor()>& compiled) {
  Row r{std::move(name), items};
  Tensor want, got;
  r.eager_ms = median_ms([&] { want = under_amp(eager); }, reps);
  r.compiled_ms = median_ms([&] { got = under_amp(compiled); }, reps, &r.first_ms);
  got = Tensor();  // the call's own output is what it adds, not the last one's as well
  r.memory = memory_of([&] { got = under_amp(compiled); });
  r.diff = difference(got, want);
  print(r);
  return r;
}

// One training step (zero_grad, the loss, backward, the optimizer's step) of two copies of the
// same weights, one eager and one compiled, compared by their first steps' losses. Both warm up
// twice: the compiled optimizer step compiles on its second call.
Row training_row(std::string name, double items, int reps, optim::Optimizer& eager_opt,
                 const std::function<Tensor()>& eager_loss, optim::Optimizer& compiled_opt,
                 const std::function<Tensor()>& compiled_loss) {
  Row r{std::move(name), items};
  auto timed = [&](optim::Optimizer& opt, const std::function<Tensor()>& loss, Tensor& first,
                   double* first_ms, Memory* memory) {
    amp::GradScaler scaler({.enabled = g_amp == kFloat16});
    auto step = [&] {
      opt.zero_grad();
      Tensor l = under_amp(loss);
      if (!first.defined()) first = l;
      scaler.scale(l).backward();
      scaler.step(opt);
      scaler.update();
    };
    const double ms = median_ms(step, reps, first_ms, 2);
    if (memory) *memory = memory_of(step);
    return ms;
  };
  Tensor le, lc;
  r.eager_ms = timed(eager_opt, eager_loss, le, nullptr, nullptr);
  r.compiled_ms = timed(compiled_opt, compiled_loss, lc, &r.first_ms, &r.memory);
  r.diff = difference(lc, le);
  print(r);
  return r;
}

std::vector<Row> resnet50_rows(const Options& o) {
  const int reps = o.quick ? 2 : 3;
  const int64_t batch = g_device.is_cuda() ? 64 : 16, train_batch = g_device.is_cuda() ? 32 : 8;
  std::vector<Row> rows;
  {
    manual_seed(0);
    auto model = nn::resnet50();
    model->to(g_device).eval();
    Tensor x = randn({batch, 3, 224, 224}).to(g_device);
    if (o.channels_last) {
      model->to(MemoryFormat::ChannelsLast);
      x = x.contiguous(MemoryFormat::ChannelsLast);
    }
    NoGradGuard no_grad;
    auto compiled = coil::compile(model, {.mode = o.mode});
    rows.push_back(inference_row(
        "resnet50 inference", double(batch), reps, [&] { return model->forward(x); },
        [&] { return compiled(x); }));
  }
  {
    manual_seed(0);
    auto eager_model = nn::resnet50(), compiled_model = nn::resnet50();
    compiled_model->load_state_dict(eager_model->state_dict());
    eager_model->to(g_device);
    compiled_model->to(g_device);
    Tensor x = randn({train_batch, 3, 224, 224}).to(g_device);
    if (o.channels_last) {
      eager_model->to(MemoryFormat::ChannelsLast);
      compiled_model->to(MemoryFormat::ChannelsLast);
      x = x.contiguous(MemoryFormat::ChannelsLast);
    }
    Tensor y = randint(0, 1000, {train_batch}).to(g_device);
    optim::SGD eager_opt(eager_model->parameters(), {.lr = 0.01, .momentum = 0.9});
    optim::SGD compiled_opt(compiled_model->parameters(),
                            {.lr = 0.01, .momentum = 0.9, .compiled = true});
    auto compiled_loss =
        coil::compile([&](const Tensor& a,
                          const Tensor& b) { return cross_entropy(compiled_model->forward(a), b); },
                      {.mode = o.mode});
    rows.push_back(training_row(
        "resnet50 train step", double(train_batch), reps, eager_opt,
        [&] { return cross_entropy(eager_model->forward(x), y); }, compiled_opt,
        [&] { return compiled_loss(x, y); }));
  }
  return rows;
}

std::vector<Row> gpt2_rows(const Options& o) {
  const int reps = o.quick ? 2 : 3;
  const int64_t batch = 8, len = 512;
  std::vector<Row> rows;
  manual_seed(0);
  auto model = nn::gpt2(nn::GPT2Config::small());
  model->to(g_device);
  Tensor ids = randint(0, 50257, {batch, len}).to(g_device);
  {
    model->eval();
    NoGradGuard no_grad;
    auto compiled = coil::compile(model, {.mode = o.mode});
    rows.push_back(inference_row(
        "gpt2 forward 8x512", double(batch * len), reps, [&] { return model->forward(ids); },
        [&] { return compiled(ids); }));
  }
  {
    model->train();
    auto twin = nn::gpt2(nn::GPT2Config::small());
    twin->load_state_dict(model->state_dict());
    twin->to(g_device);
    Tensor labels = randint(0, 50257, {batch, len}).to(g_device);
    optim::AdamW eager_opt(model->parameters(), {.lr = 1e-4});
    optim::AdamW compiled_opt(twin->parameters(), {.lr = 1e-4, .compiled = true});
    auto loss_of = [](nn::GPT2& m, const Tensor& a, const Tensor& b) {
      Tensor logits = m.forward(a);
      return cross_entropy(logits.reshape({-1, logits.size(-1)}), b.reshape({-1}));
    };
    auto compiled_loss = coil::compile(
        [&](const Tensor& a, const Tensor& b) { return loss_of(*twin, a, b); }, {.mode = o.mode});
    rows.push_back(training_row(
        "gpt2 train step 8x512", double(batch * len), reps, eager_opt,
        [&] { return loss_of(*model, ids, labels); }, compiled_opt,
        [&] { return compiled_loss(ids, labels); }));
  }
  {
    model->eval();
    const int64_t prompt = 16, new_tokens = 64;
    Tensor p = randint(0, 50257, {1, prompt}).to(g_device);
    Row r{"gpt2 generate b1", double(new_tokens)};
    Tensor want, got;
    r.eager_ms = median_ms([&] { want = nn::generate_greedy(*model, p, new_tokens, false); }, 1);
    r.compiled_ms =
        median_ms([&] { got = nn::generate_greedy(*model, p, new_tokens, true); }, 1, &r.first_ms);
    r.diff = equal(got.cpu(), want.cpu()) ? 0.0 : 1.0;
    print(r);
    rows.push_back(r);
  }
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--device" && i + 1 < argc)
      o.device = Device(argv[++i]);
    else if (a == "--model" && i + 1 < argc)
      o.model = argv[++i];
    else if (a == "--json" && i + 1 < argc)
      o.json = argv[++i];
    else if (a == "--mode" && i + 1 < argc)
      o.mode = argv[++i];
    else if (a == "--quick")
      o.quick = true;
    else if (a == "--channels-last")
      o.channels_last = true;
    else if (a == "--amp" && i + 1 < argc &&
             (std::string(argv[i + 1]) == "bf16" || std::string(argv[i + 1]) == "fp16"))
      o.amp = std::string(argv[++i]) == "bf16" ? kBFloat16 : kFloat16;
    else {
      std::cerr << "usage: coil-bench-models [--device cpu|cuda] [--model resnet50|gpt2] "
                   "[--json FILE] [--mode MODE] [--quick] [--channels-last] [--amp bf16|fp16]\n";
      return 2;
    }
  }
  try {
    g_device = o.device;
    g_amp = o.amp;
    cuda::set_cudnn_allow_tf32(false);  // full-precision float32, as compare_models.py's PyTorch
    char dir[] = "/tmp/coil-bench-models-cache-XXXXXX";  // first calls compile
    if (!mkdtemp(dir)) return 1;
    setenv("COIL_CACHE_DIR", dir, 1);
    std::printf("coil-bench-models on %s\n%-22s %10s %10s %9s %11s %11s %10s %9s\n",
                o.device.is_cuda() ? cuda::device_name(o.device.index).c_str() : "the CPU", "model",
                "eager ms", "coil ms", "speedup", "eager /s", "coil /s", "first ms", "diff");
    std::vector<Row> rows;
    if (o.model.empty() || o.model == "resnet50") {
      auto r = resnet50_rows(o);
      rows.insert(rows.end(), r.begin(), r.end());
    }
    if (o.model.empty() || o.model == "gpt2") {
      auto r = gpt2_rows(o);
      rows.insert(rows.end(), r.begin(), r.end());
    }
    bool ok = true;
    nlohmann::json report = {{"device", o.device.str()},
                             {"mode", o.mode},
                             {"channels_last", o.channels_last},
                             {"amp", o.amp ? dtype_name(*o.amp) : "off"},
                             {"rows", nlohmann::json::array()}};
    for (const Row& r : rows) {
      ok = ok && r.diff < (o.amp ? 5e-2 : 1e-2);
      report["rows"].push_back({{"name", r.name},
                                {"unit", r.name.rfind("resnet", 0) == 0 ? "images/s" : "tokens/s"},
                                {"items_per_call", r.per_call_items},
                                {"eager_ms", r.eager_ms},
                                {"compiled_ms", r.compiled_ms},
                                {"first_ms", r.first_ms},
                                {"held_mib", r.memory.held_mib},
                                {"peak_above_held_mib", r.memory.peak_above_mib},
                                {"difference", r.diff}});
    }
    if (!o.json.empty()) std::ofstream(o.json) << report.dump(2) << "\n";
    if (!ok) std::fprintf(stderr, "coil-bench-models: a compiled result differs from eager\n");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "coil-bench-models: %s\n", e.what());
    return 1;
  }
}
