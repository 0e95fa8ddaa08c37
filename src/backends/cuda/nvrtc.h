// NVRTC, the CUDA runtime compiler, loaded the first time coil compiles for a GPU (the library
// is large, and a program that never does should not pay for loading it). It needs no GPU: the
// CUDA backend's source compiles to a cubin anywhere the toolkit is installed.
#pragma once

#include <string>
#include <vector>

namespace coil::cuda {

struct NvrtcResult {
  bool ok = false;
  std::string cubin;  // the binary, when ok
  std::string log;    // the compiler's messages
};

// Compiles `source` (named `name` in messages) with `options`.
NvrtcResult nvrtc_compile(const std::string& source, const std::string& name,
                          const std::vector<std::string>& options);
// "13.0": the version, part of every cache key.
std::string nvrtc_version();

}  // namespace coil::cuda
