// coil-bench --trace: where a workload's device time goes between its kernels.
#pragma once

#include <string>
#include <vector>

#include "workloads.h"

namespace coil::bench {

// Runs `f` a few times under coil's profiler (after warm-up calls), writes the calls' timeline
// as a Chrome trace to `path`, and prints, per call on each GPU, the time from its first
// kernel's start to its last one's end, the part of it with no recorded work running, and the
// largest such gaps with the work on either side.
void trace_calls(const Program& f, const std::vector<std::vector<Tensor>>& sets,
                 const std::string& path);

}  // namespace coil::bench
