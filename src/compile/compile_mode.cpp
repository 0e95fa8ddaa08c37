#include "compile/compile_mode.h"

#include <coil/error.h>

namespace coil {

namespace {

struct Named {
  const char* name;
  CompileMode mode;
};
constexpr Named kModes[] = {{"default", CompileMode::Default},
                            {"reduce-overhead", CompileMode::ReduceOverhead},
                            {"max-autotune", CompileMode::MaxAutotune},
                            {"max-autotune-no-cudagraphs", CompileMode::MaxAutotuneNoCudagraphs}};

}  // namespace

CompileMode compile_mode(const std::string& name) {
  std::string known;
  for (const Named& m : kModes) {
    if (name == m.name) return m.mode;
    known += (known.empty() ? "" : ", ") + std::string(m.name);
  }
  throw Error(detail::str_cat("coil::compile: unknown mode '", name, "'; known modes: ", known));
}

bool records_cuda_graphs(CompileMode mode) {
  return mode == CompileMode::ReduceOverhead || mode == CompileMode::MaxAutotune;
}

bool autotunes(CompileMode mode) {
  return mode == CompileMode::MaxAutotune || mode == CompileMode::MaxAutotuneNoCudagraphs;
}

}  // namespace coil
