#include "capture/counters.h"

#include <array>
#include <atomic>

#include <coil/compile.h>

namespace coil::capture {

namespace {
constexpr int kN = static_cast<int>(Counter::kCount);
constexpr std::array<const char*, kN> kNames = {"captures",          "compiles",
                                                "recompiles",        "guard_hits",
                                                "graph_breaks",      "cache_hits",
                                                "cache_misses",      "eager_fallbacks",
                                                "generated_kernels", "extern_calls",
                                                "saved_bytes",       "save_all_bytes",
                                                "graph_cache_hits",  "graph_cache_misses",
                                                "suppressed_errors", "cudagraph_recordings",
                                                "cudagraph_replays", "cudagraph_rerecordings",
                                                "cudagraph_copies"};
std::array<std::atomic<int64_t>, kN>& values() {
  static std::array<std::atomic<int64_t>, kN> v{};
  return v;
}
}  // namespace

void bump(Counter c, int64_t by) {
  values()[static_cast<size_t>(c)].fetch_add(by, std::memory_order_relaxed);
}
void reset_counters() {
  for (auto& v : values()) v.store(0);
}

}  // namespace coil::capture

namespace coil {
std::map<std::string, int64_t> counters() {
  std::map<std::string, int64_t> out;
  for (size_t i = 0; i < capture::kNames.size(); ++i)
    out[capture::kNames[i]] = capture::values()[i].load();
  return out;
}
}  // namespace coil
