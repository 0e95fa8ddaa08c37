// The CUDA driver calls the backend needs to load generated code and launch it, found through
// the CUDA runtime (which loads the driver itself), so coil links no driver library and loads
// where there is none. A loaded cubin is a CudaModule: the CUDA backend's jit::Module.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "jit/module.h"

namespace coil::cuda {

// Several cubins in one binary, for a module compiled in parts: "coil-cubins\n", the count and
// each cubin's size (8 bytes each, little-endian), then the cubins.
std::string bundle_cubins(const std::vector<std::string>& cubins);

class CudaModule : public jit::Module {
 public:
  // Loads the cubin (or bundle of cubins) at `path` on device `device`.
  CudaModule(std::string path, int device);
  ~CudaModule() override;
  CudaModule(const CudaModule&) = delete;
  CudaModule& operator=(const CudaModule&) = delete;

  const std::string& path() const override { return path_; }
  int device() const { return device_; }
  // The kernel `name` (a CUfunction); coil::Error naming it and the file if absent.
  void* function(const std::string& name) const;

 private:
  void index_bundle();

  std::string path_;
  int device_;
  std::vector<void*> modules_;  // CUmodule, one per cubin
  mutable std::mutex mutex_;
  mutable std::map<std::string, void*> functions_;
};

// The grid of a grid-stride kernel over n items with `block` threads a block: a thread an item,
// in at most `most` blocks (the threads then loop).
inline unsigned grid_stride_blocks(int64_t n, int64_t block, int64_t most) {
  const int64_t b = (n + block - 1) / block;
  return static_cast<unsigned>(b < most ? b : most);
}

// Launches `function` on the current stream of device `device`: `grid` blocks of `block` threads,
// with `shared` bytes of dynamic shared memory; `args[i]` points at the value of parameter i.
// coil::Error naming `kernel` when the launch fails. `after_previous`, for a kernel that calls
// coil_wait_previous_kernel() (the prelude) before it touches memory: on sm_90 and later it is
// launched with programmatic stream serialisation, so that its blocks are scheduled while the
// kernel before it finishes instead of after (COIL_CUDA_PDL=0 turns that off).
void launch(void* function, const std::string& kernel, int device, unsigned grid, unsigned block,
            unsigned shared, void** args, bool after_previous = false);
// Whether launches on `device` may overlap the kernel before them (sm_90 and later, and
// COIL_CUDA_PDL is not 0).
bool programmatic_launches(int device);

}  // namespace coil::cuda
