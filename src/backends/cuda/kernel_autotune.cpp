#include "backends/cuda/kernel_autotune.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "debug/log.h"
#include "jit/cache_key.h"
#include "jit/disk_cache.h"
#include "runtime/autotune.h"
#include "runtime/cuda_runtime.h"
#include "support/config.h"

namespace coil::cuda {

namespace {

constexpr int kTimedRuns = 5;

std::string tuning_key(const TunedKernel& k) {
  const DeviceInfo& d = device_info(k.device);
  jit::Hasher h;
  h.add("kernel-autotune");
  h.add(k.module_path);
  h.add(k.kernel);
  h.add(d.name + " sm_" + std::to_string(d.major) + std::to_string(d.minor));
  return h.hex();
}

std::optional<size_t> saved_choice(const std::string& path, size_t candidates) {
  jit::SealedFile f = jit::read_sealed(path);
  if (f.state == jit::SealedFile::State::missing) return std::nullopt;
  unsigned long v = 0;
  if (f.state == jit::SealedFile::State::damaged ||
      std::sscanf(f.contents.c_str(), "%lu", &v) != 1 || v >= candidates) {
    jit::set_aside(path, f.state == jit::SealedFile::State::damaged ? f.why : "not a choice");
    return std::nullopt;
  }
  jit::touch(path);
  return static_cast<size_t>(v);
}

}  // namespace

std::optional<float> median_device_ms(void* stream, int runs, const std::function<bool()>& run) {
  if (!run()) return std::nullopt;
  auto s = static_cast<cudaStream_t>(stream);
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<float> ms;
  for (int r = 0; r < runs; ++r) {
    check(cudaEventRecord(start, s), "cudaEventRecord");
    const bool ok = run();
    check(cudaEventRecord(stop, s), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "timing an autotuning candidate");
    float t = 0;
    check(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime");
    if (ok) ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (ms.empty()) return std::nullopt;
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

std::optional<size_t> tuned_candidate(const TunedKernel& k, const std::string& sizes, bool aliased,
                                      const std::function<void(size_t)>& run) {
  static std::mutex mutex;
  static auto* chosen = new std::map<std::string, size_t>();
  if (k.candidates < 2 || !autotuning()) return std::nullopt;
  // COIL_KERNEL_LAUNCH=n runs candidate n (or the last) of every tuned kernel, untimed: each
  // launch's result can then be checked.
  if (const std::optional<std::string> forced = config::text(config::Var::KernelLaunch))
    return std::min<size_t>(std::strtoul(forced->c_str(), nullptr, 10), k.candidates - 1);
  const std::string key = tuning_key(k);
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = chosen->find(key); it != chosen->end()) return it->second;
  }
  // A capture cannot wait for events, and aliased buffers cannot be written twice: the
  // heuristics' launch this time, the timing at a later call that allows it.
  if (aliased || capturing(k.device)) return std::nullopt;
  // The cache never fails a program: without a usable folder the choice is only not kept.
  std::string path;
  try {
    path = jit::open_cache_entry(key, "autotune").path(".launch");
  } catch (const std::exception& e) {
    debug::log("autotune", k.kernel, std::string("the choice is not kept: ") + e.what());
  }
  std::optional<size_t> best = path.empty() ? std::nullopt : saved_choice(path, k.candidates);
  if (best) {
    debug::log("autotune", k.kernel,
               "the launch chosen in an earlier run: candidate " + std::to_string(*best));
  } else {
    std::string report = "launches at sizes [" + sizes + "]:";
    float best_ms = 0, first_ms = 0;
    for (size_t i = 0; i < k.candidates; ++i) {
      const float ms = *median_device_ms(stream(k.device), kTimedRuns, [&] {
        run(i);
        return true;
      });
      char line[80];
      std::snprintf(line, sizeof line, "\n  candidate %zu%s: %.4f ms", i,
                    i == 0 ? " (the heuristics')" : "", ms);
      report += line;
      if (i == 0) first_ms = ms;
      if (!best || ms < best_ms) best = i, best_ms = ms;
    }
    char kept[96];
    std::snprintf(kept, sizeof kept, "\n  kept candidate %zu (%.2fx the heuristics' launch)", *best,
                  best_ms > 0 ? first_ms / best_ms : 1.0);
    debug::log("autotune", k.kernel, report + kept);
    try {
      if (!path.empty()) jit::write_file_atomically(path, std::to_string(*best), /*sealed=*/true);
    } catch (const std::exception& e) {
      debug::log("autotune", k.kernel, std::string("the choice is not kept: ") + e.what());
    }
  }
  std::lock_guard<std::mutex> lock(mutex);
  chosen->emplace(key, *best);
  return *best;
}

}  // namespace coil::cuda
