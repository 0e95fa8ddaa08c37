// The seed cache: compiled code that ships with coil, read-only, consulted when the code cache
// (disk_cache.h) misses. The build compiles the GPU kernels coil writes by hand (flash
// attention, random draws, copies, pooling, cumsum, scatter_add) into it, so that a first call
// that needs one loads it instead of waiting for NVRTC, as PyTorch ships its kernels compiled.
// Its files are the code cache's (same keys, same seals): a hit is copied into the code cache
// and loaded from there. It lives in coil-kernels/ beside libcoil (the build folder, or the
// installed library's folder); $COIL_SEED_DIR names another, and COIL_SEED_DIR= (empty) none.
#pragma once

#include <optional>
#include <string>

namespace coil::jit {

// The seed folder in effect, "" when there is none.
std::string seed_root();

// The sealed contents of `key`'s file with `extension` in the seed, when it holds it whole.
std::optional<std::string> seeded(const std::string& key, const std::string& extension);

}  // namespace coil::jit
