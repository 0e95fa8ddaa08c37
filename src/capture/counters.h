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
  generated_kernels,  // kernels the inductor backend generated
  extern_calls,       // library/eager kernels its compiled graphs call
  saved_bytes,        // bytes compiled forwards save for their backwards (the partitioner's cut)
  save_all_bytes,     // what saving every forward value the backwards read would have cost
  graph_cache_hits,   // compiles served by the compiled-graph cache (jit/graph_cache.h)
  graph_cache_misses,
  suppressed_errors,  // failed compiles that ran eagerly instead (CompileOptions::suppress_errors)
  cudagraph_recordings,    // mode="reduce-overhead": CUDA graphs recorded...
  cudagraph_replays,       // ...calls that replayed one...
  cudagraph_rerecordings,  // ...recorded again for large inputs at other addresses...
  cudagraph_copies,        // ...and held outputs of earlier replays moved to memory of their own
  kCount
};
void bump(Counter c, int64_t by = 1);
void reset_counters();

}  // namespace coil::capture
