// The report of bench/probes' "gaps" modes: one call's wall time, its work's device time, and the
// device's idle time summed by the work that came after it (a host-bound call waits for the host
// before each piece of work: where the host is slow), then coil's profiler table by name.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <coil/cuda.h>
#include <coil/profiler.h>

inline void report_gaps(const std::string& what, const std::function<void()>& call) {
  coil::cuda::synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  coil::Profiler p;
  call();
  const double wall =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::map<std::string, std::pair<double, int>> idle_before;  // ms, count
  double covered_to = -1, idle = 0, busy = 0, first_start = -1;
  for (const coil::Profiler::Span& sp : p.timeline()) {
    if (sp.device == "cpu") continue;
    if (covered_to >= 0 && sp.start_ms > covered_to) {
      idle += sp.start_ms - covered_to;
      auto& [ms, n] = idle_before[sp.kind + " " + sp.name];
      ms += sp.start_ms - covered_to, ++n;
    }
    if (first_start < 0) first_start = sp.start_ms;
    busy += sp.end_ms - sp.start_ms;
    covered_to = std::max(covered_to, sp.end_ms);
  }
  std::printf(
      "%s: %.2f ms wall, %.2f ms of work, %.2f ms idle between, %.2f ms before the first work "
      "and after the last\n",
      what.c_str(), wall, busy, idle, wall - (covered_to - first_start));
  std::vector<std::pair<std::string, std::pair<double, int>>> order(idle_before.begin(),
                                                                    idle_before.end());
  std::sort(order.begin(), order.end(),
            [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::printf("idle before (the host's time to get there), largest first:\n");
  for (size_t i = 0; i < order.size() && i < 25; ++i)
    std::printf("  %9.3f ms  %5dx  %s\n", order[i].second.first, order[i].second.second,
                order[i].first.c_str());
  std::printf("%s", p.table(40).c_str());
}
