#include "compile/compile_settings.h"

#include <coil/error.h>

namespace coil {

namespace {

struct NamedMode {
  const char* name;
  CompileMode mode;
};
constexpr NamedMode kModes[] = {
    {"default", CompileMode::Default},
    {"reduce-overhead", CompileMode::ReduceOverhead},
    {"max-autotune", CompileMode::MaxAutotune},
    {"max-autotune-no-cudagraphs", CompileMode::MaxAutotuneNoCudagraphs}};

struct NamedFlag {
  const char* name;
  bool CompileFlags::*field;
};
constexpr NamedFlag kFlags[] = {{"trace.enabled", &CompileFlags::trace_enabled},
                                {"trace.graph_diagram", &CompileFlags::trace_graph_diagram},
                                {"async_compile", &CompileFlags::async_compile},
                                {"freezing", &CompileFlags::freezing}};

template <typename Table>
std::string names(const Table& table) {
  std::string out;
  for (const auto& entry : table) out += (out.empty() ? "" : ", ") + std::string(entry.name);
  return out;
}

}  // namespace

CompileMode compile_mode(const std::string& name) {
  for (const NamedMode& m : kModes)
    if (name == m.name) return m.mode;
  throw Error(
      detail::str_cat("coil::compile: unknown mode '", name, "'; known modes: ", names(kModes)));
}

bool records_cuda_graphs(CompileMode mode) {
  return mode == CompileMode::ReduceOverhead || mode == CompileMode::MaxAutotune;
}

bool autotunes(CompileMode mode) {
  return mode == CompileMode::MaxAutotune || mode == CompileMode::MaxAutotuneNoCudagraphs;
}

CompileFlags compile_flags(const CompileOptions& options) {
  CompileFlags flags;
  for (const auto& [key, value] : options.options) {
    const NamedFlag* flag = nullptr;
    for (const NamedFlag& f : kFlags)
      if (key == f.name) flag = &f;
    COIL_CHECK(flag, "coil::compile: unknown option '", key, "'; known options: ", names(kFlags));
    const bool* on = std::get_if<bool>(&value);
    COIL_CHECK(on, "coil::compile: option '", key, "' takes true or false");
    flags.*(flag->field) = *on;
  }
  return flags;
}

}  // namespace coil
