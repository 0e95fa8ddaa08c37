// The probes' device time of a piece of GPU work: CUDA events around each call, the median of
// 10 calls after 3.
#pragma once

#include <algorithm>
#include <functional>
#include <vector>

#include <coil/cuda.h>

inline double median_device_ms(const std::function<void()>& fn) {
  for (int i = 0; i < 3; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < 10; ++i) {
    coil::cuda::Event a(true), b(true);
    a.record();
    fn();
    b.record();
    b.synchronize();
    t.push_back(a.elapsed_time(b));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
