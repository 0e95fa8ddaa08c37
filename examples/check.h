// What every seed example ends with: the compiled result next to eager's, and the largest
// difference between them. A difference beyond `tolerance` makes the example fail (exit 1),
// so the examples double as smoke tests.
#pragma once

#include <coil/coil.h>

#include <cmath>
#include <iostream>
#include <string>

namespace examples {

// Prints "<what>: max |compiled - eager| = 1.2e-07 (ok)" and returns whether it is within
// `tolerance`, relative to the largest eager magnitude (at least 1).
inline bool check(const std::string& what, const coil::Tensor& compiled, const coil::Tensor& eager,
                  double tolerance = 1e-5) {
  if (compiled.sizes() != eager.sizes()) {
    std::cout << what << ": compiled and eager results have different shapes\n";
    return false;
  }
  double diff =
      (compiled.to(coil::kFloat64) - eager.to(coil::kFloat64)).abs().amax().item<double>();
  double scale = std::max(1.0, eager.to(coil::kFloat64).abs().amax().item<double>());
  bool ok = diff <= tolerance * scale;
  std::cout << what << ": max |compiled - eager| = " << diff << (ok ? " (ok)" : " (TOO LARGE)")
            << "\n";
  return ok;
}

// The counters of coil::compile that are not zero, on one line; the graph cache's hits and
// misses are left out, since they depend on what earlier runs left in the cache.
inline std::string counters_line() {
  std::string s;
  for (const auto& [name, value] : coil::counters())
    if (value && name.rfind("graph_cache_", 0) != 0)
      s += (s.empty() ? "" : " ") + name + "=" + std::to_string(value);
  return s.empty() ? "(all zero)" : s;
}

}  // namespace examples
