// The content address of compiled code (as Inductor's code hash): equal keys mean the same
// source built by the same compiler, with the same flags, for the same machine or GPU.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct XXH3_state_s;

namespace coil::jit {

// `size` bytes as lowercase hex, two digits each.
std::string to_hex(const void* data, size_t size);

// XXH3-128 over a sequence of fields, as 32 hex digits.
class Hasher {
 public:
  Hasher();
  // Each field is length-prefixed, so ("ab", "c") and ("a", "bc") hash differently.
  void add(std::string_view field);
  // Count-prefixed, so a flag moved from one list to the next changes the key.
  void add(const std::vector<std::string>& list);
  std::string hex() const;

 private:
  std::unique_ptr<XXH3_state_s, void (*)(XXH3_state_s*)> state_;
};

// The hash of the source and every field that decides what a compiler makes of it
// (Compiler::key_fields).
std::string cache_key(const std::string& source, const std::vector<std::string>& compiler_fields);

}  // namespace coil::jit
