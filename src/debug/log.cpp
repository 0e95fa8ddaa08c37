#include "debug/log.h"
#include "support/config.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <sstream>

#include <coil/error.h>

namespace coil::debug {

const std::vector<Artifact>& artifacts() {
  static const std::vector<Artifact> list = {
      {"graph_code", "the graph captured from each compiled function"},
      {"guards", "the guards a captured graph holds for"},
      {"recompiles", "why a call did not match any cached graph and recompiled"},
      {"dynamic",
       "dynamic shapes: size symbols as they are made, guards on them and why, "
       "specialisations, dims made dynamic after a recompile"},
      {"graph_breaks", "each graph break: the operation that needed a value and its source line"},
      {"cache", "compiled-graph and compiled-code (jit) cache hits and misses"},
      {"timeline", "a one-line summary of each compile's stage times"},
      {"aot_graphs", "the joint forward+backward graph, and the forward and backward graphs"},
      {"partitioner", "what the partitioner saved for the backward, what it recomputes, bytes"},
      {"passes", "each graph pass: whether it changed the graph, and its time"},
      {"passes_graphs", "the graph after each pass that changed it"},
      {"decompositions", "the graph after decompositions"},
      {"post_grad_graphs", "the graph after the post-grad passes: what lowering receives"},
      {"ir_pre_fusion", "the loop IR: every buffer with its layout and body"},
      {"fusion", "every fusion decision, yes or no, with its reason"},
      {"schedule", "the order the kernels and library (extern) calls run in"},
      {"ir_post_fusion", "the kernels after fusion, over their loop variables"},
      {"output_code", "the generated C++ source and the wrapper that calls it"},
      {"cudagraphs",
       "mode=\"reduce-overhead\": each CUDA graph recorded, and why a graph runs without one"},
      {"autotune",
       "mode=\"max-autotune\": each product's candidate algorithms and each generated kernel's "
       "launches, with their times, and the one kept"},
      {"device_eager", "eager GPU ops: each one compiled for a new shape, each run on the CPU"},
      {"fallbacks",
       "the Python backend: each ATen op a graph runs in PyTorch between coil's parts, counted"},
  };
  return list;
}

namespace {
struct Settings {
  std::mutex mutex;
  std::set<std::string> enabled;
  FILE* out = stderr;
  std::atomic<bool> any{false};
};
Settings& settings() {
  static Settings s;
  return s;
}
std::once_flag loaded;

void load() {
  Settings& s = settings();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.enabled.clear();
  if (s.out != stderr && s.out) std::fclose(s.out);
  s.out = stderr;
  std::string spec = config::text(config::Var::Logs).value_or("");
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (item.empty()) continue;
    if (item == "help") {
      std::fprintf(stderr, "COIL_LOGS artifacts (comma-separated):\n");
      for (const auto& a : artifacts()) std::fprintf(stderr, "  %-14s %s\n", a.name, a.help);
      continue;
    }
    if (item == "all") {
      for (const auto& a : artifacts()) s.enabled.insert(a.name);
      continue;
    }
    bool known = false;
    for (const auto& a : artifacts()) known = known || item == a.name;
    if (!known) {
      std::fprintf(stderr,
                   "coil: COIL_LOGS names unknown artifact '%s' (COIL_LOGS=help lists them)\n",
                   item.c_str());
      continue;
    }
    s.enabled.insert(item);
  }
  if (const std::optional<std::string> file = config::text(config::Var::LogFile);
      file && !s.enabled.empty()) {
    if (FILE* f = std::fopen(file->c_str(), "a")) s.out = f;
  }
  s.any = !s.enabled.empty();
}
}  // namespace

void reload_log_settings() {
  std::call_once(loaded, [] {});
  load();
}

bool log_enabled(const char* artifact) {
  std::call_once(loaded, load);
  Settings& s = settings();
  if (!s.any.load(std::memory_order_relaxed)) return false;
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.enabled.count(artifact) > 0;
}

void log(const char* artifact, const std::string& prefix, const std::string& text) {
  if (!log_enabled(artifact)) return;
  Settings& s = settings();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line))
    std::fprintf(s.out, "[%s] %s %s\n", artifact, prefix.c_str(), line.c_str());
  std::fflush(s.out);
}

}  // namespace coil::debug

namespace coil::debug {

void warn(const std::string& text) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  std::fprintf(stderr, "coil: warning: %s\n", text.c_str());
  std::fflush(stderr);
}

}  // namespace coil::debug
