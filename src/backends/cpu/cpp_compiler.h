// The CPU backend's compiler: the system C++ compiler (toolchain.h) turns a graph's generated
// source into a shared library, which dlopen loads (library.h). The source is header-free (it
// includes nothing and declares what it calls, e.g. SLEEF's Sleef_expf16_u10), so it compiles
// in tens of milliseconds. A large source (the backward of a deep network: hundreds of kernels)
// is compiled in parts, one compiler per core, then linked (jit/source_parts.h).
#pragma once

#include <memory>
#include <string>

#include "backends/cpu/library.h"
#include "backends/cpu/toolchain.h"
#include "jit/code_cache.h"
#include "jit/compiler.h"

namespace coil::cpu {

class CppCompiler : public jit::Compiler {
 public:
  explicit CppCompiler(Toolchain toolchain) : toolchain_(std::move(toolchain)) {}

  std::vector<std::string> key_fields() const override;
  const char* source_extension() const override { return ".cpp"; }
  const char* binary_extension() const override { return ".so"; }
  std::string name() const override { return toolchain_.compiler; }
  Outcome compile(const std::string& source, const std::string& source_path,
                  const std::string& output_path) const override;
  const char* loader() const override { return "dlopen"; }
  std::shared_ptr<const jit::Module> load(const std::string& binary_path) const override;

 private:
  Toolchain toolchain_;
};

// Compiles `source` with the toolchain the environment names now (unless the code cache has
// it) and loads it: jit::load with a CppCompiler.
std::shared_ptr<const Library> load_cpp(const std::string& source, const std::string& name_hint,
                                        jit::LoadInfo* info = nullptr);

}  // namespace coil::cpu
