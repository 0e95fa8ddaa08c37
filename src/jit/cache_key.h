// The content address of compiled code (as Inductor's code hash): equal keys mean the same
// source built by the same compiler, with the same flags, for the same machine.
#pragma once

#include <string>

#include "jit/toolchain.h"

namespace coil::jit {

// 32 hex digits of XXH3-128 over the source and every field of the toolchain.
std::string cache_key(const std::string& source, const Toolchain& toolchain);

}  // namespace coil::jit
