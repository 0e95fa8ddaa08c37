// Small text helpers the commands share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace coil::tool {

// "1 kernel", "2 kernels".
inline std::string plural(int64_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

// "a, b, c"; `empty` when there is nothing to join.
inline std::string join(const std::vector<std::string>& items, const std::string& empty = "") {
  std::string s;
  for (const std::string& i : items) s += (s.empty() ? "" : ", ") + i;
  return s.empty() ? empty : s;
}

}  // namespace coil::tool
