#include "backends/cpu/cpu_backend.h"

#include "backends/cpu/cpp_compiler.h"
#include "backends/cpu/cpp_kernel.h"
#include "backends/cpu/cpp_prelude.h"
#include "jit/source_parts.h"

namespace coil::cpu {

std::optional<std::string> CpuBackend::library_call(const Node& n) const {
  if (op_info(n.op()).kind == OpKind::Extern) return "library kernel";
  if (n.op() == OpId::scaled_dot_product_attention)
    return "attention's eager kernel (library products, vectorised rows)";
  return std::nullopt;
}

codegen::KernelSource CpuBackend::generate_kernel(const schedule::Kernel& k,
                                                  const ir::Program& program) const {
  return cpu::generate_kernel(k, program);
}

std::string CpuBackend::module_source(const std::vector<codegen::KernelSource>& kernels) const {
  std::string s = cpp_prelude();
  for (const codegen::KernelSource& k : kernels)
    if (k.defines_function()) s += std::string(jit::kPartBoundary) + k.code;
  return s;
}

std::string_view CpuBackend::prelude() const { return cpp_prelude(); }

std::unique_ptr<jit::Compiler> CpuBackend::compiler() const {
  return std::make_unique<CppCompiler>(current_toolchain());
}

codegen::KernelCall CpuBackend::bind(const jit::Module& module,
                                     const codegen::WrapperPlan::Step& step) const {
  auto fn = static_cast<const Library&>(module).function<void(void* const*)>(step.kernel);
  return [fn](void* const* args, const int64_t*) { fn(args); };
}

}  // namespace coil::cpu
