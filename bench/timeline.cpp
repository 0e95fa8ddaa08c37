#include "timeline.h"

#include <coil/cuda.h>
#include <coil/profiler.h>

#include <algorithm>
#include <cstdio>
#include <map>

namespace coil::bench {

namespace {

struct Gap {
  double ms;
  std::string before, after;
};

// One call's spans on one device: from the first start to the last end, how much of it no span
// covered, and the gaps largest first.
void summarize(const std::string& device, const std::vector<Profiler::Span>& spans, int call) {
  double first = 1e300, last = -1e300, covered_to = -1e300, idle = 0;
  std::vector<Gap> gaps;
  std::string previous;
  for (const Profiler::Span& s : spans) {
    first = std::min(first, s.start_ms);
    last = std::max(last, s.end_ms);
    if (!previous.empty() && s.start_ms > covered_to) {
      idle += s.start_ms - covered_to;
      gaps.push_back({s.start_ms - covered_to, previous, s.name});
    }
    covered_to = std::max(covered_to, s.end_ms);
    previous = s.name;
  }
  std::sort(gaps.begin(), gaps.end(), [](const Gap& a, const Gap& b) { return a.ms > b.ms; });
  std::printf(
      "  call %d on %s: %zu spans, %.3f ms first start to last end, %.1f us of it idle in "
      "%zu gaps\n",
      call, device.c_str(), spans.size(), last - first, 1e3 * idle, gaps.size());
  for (size_t i = 0; i < gaps.size() && i < 6; ++i)
    std::printf("    %7.1f us  after %s, before %s\n", 1e3 * gaps[i].ms, gaps[i].before.c_str(),
                gaps[i].after.c_str());
}

}  // namespace

void trace_calls(const Program& f, const std::vector<std::vector<Tensor>>& sets,
                 const std::string& path) {
  for (int w = 0; w < 3; ++w) f(sets[static_cast<size_t>(w) % sets.size()]);
  cuda::synchronize();
  std::printf(
      "timeline (coil's profiler: CUDA events around each kernel, library call and eager "
      "op; %s)\n",
      path.c_str());
  for (int call = 1; call <= 3; ++call) {
    Profiler p;
    f(sets[static_cast<size_t>(call) % sets.size()]);
    cuda::synchronize();
    std::map<std::string, std::vector<Profiler::Span>> by_device;
    for (const Profiler::Span& s : p.timeline())
      if (s.device != "cpu") by_device[s.device].push_back(s);
    for (const auto& [device, spans] : by_device) summarize(device, spans, call);
    if (call == 3) p.export_chrome_trace(path);
  }
}

}  // namespace coil::bench
