#include "jit/seed_cache.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>

#include "jit/disk_cache.h"
#include "support/config.h"

namespace coil::jit {

namespace {

// The folder of the shared object this function is in (libcoil), "" when unknown.
std::string library_dir() {
  Dl_info info{};
  if (!::dladdr(reinterpret_cast<void*>(&library_dir), &info) || !info.dli_fname) return "";
  std::error_code error;
  const auto path = std::filesystem::canonical(info.dli_fname, error);
  return error ? "" : path.parent_path().string();
}

}  // namespace

std::string seed_root() {
  if (std::optional<std::string> dir = config::value(config::Var::SeedDir)) return *dir;
  static const std::string beside_library = [] {
    const std::string dir = library_dir();
    std::error_code error;
    return !dir.empty() && std::filesystem::is_directory(dir + "/coil-kernels", error)
               ? dir + "/coil-kernels"
               : std::string();
  }();
  return beside_library;
}

std::optional<std::string> seeded(const std::string& key, const std::string& extension) {
  const std::string root = seed_root();
  if (root.empty() || key.size() < 3) return std::nullopt;
  SealedFile file = read_sealed(root + "/" + key.substr(0, 2) + "/" + key + extension);
  if (file.state != SealedFile::State::ok) return std::nullopt;
  return std::move(file.contents);
}

}  // namespace coil::jit
