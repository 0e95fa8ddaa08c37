// The CPU backend: header-free, vectorised C++ with OpenMP and SLEEF (cpp_kernel.h), compiled
// by the system C++ compiler and loaded with dlopen (cpp_compiler.h); each kernel is a function
// `void name(void* const* args)` the wrapper calls directly. Matrix products, convolutions and
// attention are library calls (oneDNN, OpenBLAS, coil's attention kernel).
#pragma once

#include "backends/backend.h"

namespace coil::cpu {

class CpuBackend : public backends::DeviceBackend {
 public:
  DeviceType device() const override { return DeviceType::CPU; }
  const char* name() const override { return "cpp"; }
  std::optional<std::string> library_call(const Node& n) const override;
  codegen::KernelSource generate_kernel(const schedule::Kernel& k,
                                        const ir::Program& program) const override;
  std::string module_source(const std::vector<codegen::KernelSource>& kernels) const override;
  std::string_view prelude() const override;
  const char* source_extension() const override { return ".cpp"; }
  std::unique_ptr<jit::Compiler> compiler() const override;
  codegen::KernelCall bind(const jit::Module& module,
                           const codegen::WrapperPlan::Step& step) const override;
};

}  // namespace coil::cpu
