#include "codegen/shared_kernels.h"

#include <cctype>
#include <unordered_map>

namespace coil::codegen {

namespace {

bool identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

}  // namespace

std::string positional_code(const KernelSource& k) {
  std::unordered_map<std::string, std::string> position{{k.name, "@kernel"}};
  for (size_t i = 0; i < k.args.size(); ++i) position.emplace(k.args[i], "@" + std::to_string(i));
  // An identifier is replaced whole, or from just after one of its underscores (acc_buf3,
  // red_buf3): names of buffers and kernels have none of their own.
  auto rename = [&](const std::string& id) {
    if (auto it = position.find(id); it != position.end()) return it->second;
    for (size_t at = id.find('_'); at != std::string::npos; at = id.find('_', at + 1))
      if (auto it = position.find(id.substr(at + 1)); it != position.end())
        return id.substr(0, at + 1) + it->second;
    return id;
  };
  std::string out;
  out.reserve(k.code.size());
  for (size_t i = 0; i < k.code.size();) {
    const char c = k.code[i];
    if (!identifier_char(c)) {
      out += c;
      ++i;
      continue;
    }
    size_t end = i;
    while (end < k.code.size() && identifier_char(k.code[end])) ++end;
    const std::string id = k.code.substr(i, end - i);
    out += std::isdigit(static_cast<unsigned char>(c)) ? id : rename(id);
    i = end;
  }
  return out;
}

int share_identical_kernels(std::vector<KernelSource>& kernels) {
  std::unordered_map<std::string, std::string> first;  // positional code -> function
  int shared = 0;
  for (KernelSource& k : kernels) {
    auto [it, added] = first.emplace(positional_code(k), k.name);
    k.function = it->second;
    shared += !added;
  }
  return shared;
}

}  // namespace coil::codegen
