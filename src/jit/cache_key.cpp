#include "jit/cache_key.h"

#include <xxhash.h>

#include <cstdint>

#include <coil/error.h>

namespace coil::jit {

// Bump when the layout of cached files or the meaning of a key changes, so old entries are
// never mistaken for new ones.
constexpr std::string_view kFormat = "coil-jit-2";

Hasher::Hasher() : state_(XXH3_createState(), [](XXH3_state_t* s) { XXH3_freeState(s); }) {
  COIL_ASSERT(state_ && XXH3_128bits_reset(state_.get()) == XXH_OK);
}

void Hasher::add(std::string_view field) {
  uint64_t size = field.size();
  XXH3_128bits_update(state_.get(), &size, sizeof size);
  XXH3_128bits_update(state_.get(), field.data(), field.size());
}

void Hasher::add(const std::vector<std::string>& list) {
  add(std::to_string(list.size()));
  for (const std::string& item : list) add(item);
}

std::string to_hex(const void* data, size_t size) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
  return out;
}

std::string Hasher::hex() const {
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, XXH3_128bits_digest(state_.get()));
  return to_hex(canonical.digest, sizeof canonical.digest);
}

std::string cache_key(const std::string& source, const std::vector<std::string>& compiler_fields) {
  Hasher h;
  h.add(kFormat);
  h.add(source);
  h.add(compiler_fields);
  return h.hex();
}

}  // namespace coil::jit
