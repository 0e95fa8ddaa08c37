#include "compile/compile_backends.h"

#include <coil/error.h>

namespace coil {

const std::vector<CompileBackend>& compile_backends() {
  using D = CompileBackend::Depth;
  static const std::vector<CompileBackend> table = {
      {"eager", D::capture},
      {"aot_eager", D::graph},
      {"inductor", D::code},
  };
  return table;
}

const CompileBackend& compile_backend(const std::string& name) {
  std::string known;
  for (const CompileBackend& b : compile_backends()) {
    if (name == b.name) return b;
    known += std::string(known.empty() ? "" : ", ") + b.name;
  }
  throw Error("coil::compile: unknown backend '" + name + "'; known backends: " + known);
}

}  // namespace coil
