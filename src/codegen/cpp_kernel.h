// One kernel of the schedule as a C++ function: its loop nest (OpenMP across the outer loops
// when the work is large enough, the innermost loop vectorised when every value allows it),
// reductions with their accumulators, and the loads and stores of its buffers.
#pragma once

#include <string>
#include <vector>

#include "codegen/cpp_expr.h"
#include "ir/program.h"
#include "schedule/kernel.h"

namespace coil::codegen {

struct KernelSource {
  std::string name;
  std::string code;               // `extern "C" void name(void* const* args) {...}`
  std::vector<std::string> args;  // the buffers args[i] points to, in order
  bool vectorized = false;
  bool parallel = false;
  // (written, read) buffer pairs that may share memory: the kernel reads the second only at the
  // element it then writes the first, before writing it. When the read buffer dies at this
  // kernel, the wrapper writes the result into it (Inductor's in-place buffers).
  std::vector<std::pair<std::string, std::string>> inplace;
  // The bounds its indirect loads check; when any, the kernel takes the error record too.
  std::vector<IndexCheck> index_checks;
};

KernelSource generate_kernel(const schedule::Kernel& k, const ir::Program& program);

}  // namespace coil::codegen
