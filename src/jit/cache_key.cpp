#include "jit/cache_key.h"

#include <xxhash.h>

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include <coil/error.h>

namespace coil::jit {

namespace {

// Bump when the layout of cached files or the meaning of a key changes, so old entries are
// never mistaken for new ones.
constexpr std::string_view kFormat = "coil-jit-1";

class Hasher {
 public:
  Hasher() : state_(XXH3_createState(), XXH3_freeState) {
    COIL_ASSERT(state_ && XXH3_128bits_reset(state_.get()) == XXH_OK);
  }
  // Each field is length-prefixed, so ("ab", "c") and ("a", "bc") hash differently.
  void add(std::string_view field) {
    uint64_t size = field.size();
    XXH3_128bits_update(state_.get(), &size, sizeof size);
    XXH3_128bits_update(state_.get(), field.data(), field.size());
  }
  // Count-prefixed, so a flag moved from one list to the next changes the key.
  void add(const std::vector<std::string>& list) {
    add(std::to_string(list.size()));
    for (const std::string& item : list) add(item);
  }
  std::string hex() const {
    XXH128_canonical_t canonical;
    XXH128_canonicalFromHash(&canonical, XXH3_128bits_digest(state_.get()));
    static const char digits[] = "0123456789abcdef";
    std::string out;
    for (unsigned char byte : canonical.digest) {
      out += digits[byte >> 4];
      out += digits[byte & 15];
    }
    return out;
  }

 private:
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state_;
};

}  // namespace

std::string cache_key(const std::string& source, const Toolchain& toolchain) {
  Hasher h;
  h.add(kFormat);
  h.add(source);
  h.add(toolchain.compiler);
  h.add(toolchain.version);
  h.add(toolchain.flags);
  h.add(toolchain.libs);
  h.add(toolchain.machine);
  return h.hex();
}

}  // namespace coil::jit
