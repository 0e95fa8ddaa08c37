// Process-wide event counts (coil::counters()), as torch._dynamo.utils.counters.
#pragma once

#include <cstdint>

namespace coil::capture {

enum class Counter : uint8_t {
  captures,
  compiles,
  recompiles,
  guard_hits,
  graph_breaks,
  cache_hits,
  cache_misses,
  eager_fallbacks,
  kCount
};
void bump(Counter c, int64_t by = 1);
void reset_counters();

}  // namespace coil::capture
