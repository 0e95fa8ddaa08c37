// The CUDA backend's compiler for the code cache: NVRTC turns a graph's CUDA C++ into a cubin
// for the GPU's architecture (sm_90 on an H100 or H200), and the driver loads it (a
// CudaModule). Without a GPU (CI), the architecture is $COIL_CUDA_ARCH or sm_90, so generated
// code still compiles and is checked.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "jit/code_cache.h"
#include "jit/compiler.h"

namespace coil::cuda {

class NvrtcCompiler : public jit::Compiler {
 public:
  // For device `device` (its architecture; -1: no device, compile only).
  explicit NvrtcCompiler(int device);

  std::vector<std::string> key_fields() const override;
  const char* source_extension() const override { return ".cu"; }
  const char* binary_extension() const override { return ".cubin"; }
  std::string name() const override;
  Outcome compile(const std::string& source, const std::string& source_path,
                  const std::string& output_path) const override;
  const char* loader() const override { return "cuModuleLoadData"; }
  std::shared_ptr<const jit::Module> load(const std::string& binary_path) const override;

  const std::string& arch() const { return arch_; }

 private:
  int device_;
  std::string arch_;  // "sm_90"
  std::vector<std::string> options_;
};

// Kernel `name` of a hand-written module (the runtime's random draws, cumsum, scatter_add):
// compiled with NVRTC and loaded once per device and `key` (also the module's name in the code
// cache); `source` is called only then. Kept for the process.
void* hand_written_kernel(int device, const std::string& key, const std::string& name,
                          const std::function<std::string()>& source);

}  // namespace coil::cuda
