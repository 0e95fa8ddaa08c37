#include "codegen/shared_kernels.h"

#include <algorithm>
#include <cctype>
#include <unordered_map>

namespace coil::codegen {

namespace {

bool identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Whether `id` is a buffer's name (buf3, in0, const2): a kernel's register-only values are
// named after the buffers they stand for, which are not its arguments.
bool buffer_name(const std::string& id) {
  for (const char* prefix : {"buf", "in", "const"}) {
    const size_t n = std::char_traits<char>::length(prefix);
    if (id.size() > n && id.compare(0, n, prefix) == 0 &&
        std::all_of(id.begin() + static_cast<std::ptrdiff_t>(n), id.end(),
                    [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
      return true;
  }
  return false;
}

}  // namespace

std::string positional_code(const KernelSource& k) {
  std::unordered_map<std::string, std::string> position{{k.name, "@kernel"}};
  for (size_t i = 0; i < k.args.size(); ++i) position.emplace(k.args[i], "@" + std::to_string(i));
  // An identifier is replaced whole, or from just after one of its underscores (acc_buf3,
  // red_buf3): names of buffers and kernels have none of their own. Other buffers' names
  // (values kept in registers) are numbered in order of appearance.
  int others = 0;
  auto lookup = [&](const std::string& id) -> const std::string* {
    if (auto it = position.find(id); it != position.end()) return &it->second;
    if (!buffer_name(id)) return nullptr;
    return &position.emplace(id, "@r" + std::to_string(others++)).first->second;
  };
  auto rename = [&](const std::string& id) {
    if (const std::string* p = lookup(id)) return *p;
    for (size_t at = id.find('_'); at != std::string::npos; at = id.find('_', at + 1))
      if (const std::string* p = lookup(id.substr(at + 1))) return id.substr(0, at + 1) + *p;
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
