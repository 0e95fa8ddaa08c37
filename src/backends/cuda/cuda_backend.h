// The CUDA backend: CUDA C++ kernels (cuda_kernel.h) over the prelude's helpers, compiled by
// NVRTC for the GPU's architecture and loaded by the driver (cuda_compiler.h); the wrapper
// launches each kernel on coil's stream of the graph's device. Matrix products, convolutions
// and attention are library calls, as on the CPU.
#pragma once

#include <cstdint>

#include "backends/backend.h"

namespace coil::cuda {

// A kernel's divider of a run-time divisor d >= 1 (the prelude's coil_divider, same layout): the
// magic number and shift that turn the division of a numerator n < 2^63 into a multiply-high,
// an add and a shift, (umulhi64(n, m) + n) >> s. The launch makes one per divisor from the
// call's sizes.
struct Divider {
  int64_t d;
  uint64_t m = 0;
  uint32_t s = 0;
};
static_assert(sizeof(Divider) == 24, "the prelude's coil_divider is 24 bytes");
Divider make_divider(int64_t d);

class CudaBackend : public backends::DeviceBackend {
 public:
  // For device `device` (-1: no GPU, compile only).
  explicit CudaBackend(int device) : device_(device) {}
  DeviceType device() const override { return DeviceType::CUDA; }
  const char* name() const override { return "cuda"; }
  std::optional<std::string> library_call(const Node& n) const override;
  codegen::KernelSource generate_kernel(const schedule::Kernel& k,
                                        const ir::Program& program) const override;
  std::vector<codegen::KernelSource> launch_alternatives(const schedule::Kernel& k,
                                                         const ir::Program& program) const override;
  std::string module_source(const std::vector<codegen::KernelSource>& kernels) const override;
  std::string_view prelude() const override;
  const char* source_extension() const override { return ".cu"; }
  std::unique_ptr<jit::Compiler> compiler() const override;
  codegen::KernelCall bind(const jit::Module& module,
                           const codegen::WrapperPlan::Step& step) const override;
  // shipped_kernels.cpp: flash attention, random draws, copies, pooling, cumsum, scatter_add.
  int precompile_library_kernels(std::vector<std::string>* names) const override;

 private:
  int device_;
};

}  // namespace coil::cuda
