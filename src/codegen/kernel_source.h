// A generated kernel as the wrapper and the code cache see it, whatever the backend: its name,
// its source, the buffers it takes, which of them it may write in place, and the index checks
// it reports.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace coil::codegen {

// A bound an indirect load's index value is checked against. A kernel that has any takes a
// pointer to an error record after its buffers (i64[2]: the failed check's position in the
// kernel's list plus one, and the value); the wrapper turns a record into a coil::Error.
struct IndexCheck {
  std::string op;  // named in the error
  int64_t bound;
  bool operator==(const IndexCheck&) const = default;
};

// How a GPU kernel is launched: `grid` blocks of `block` threads, with `shared` bytes of dynamic
// shared memory (all 0 for CPU kernels).
struct Launch {
  int64_t grid = 0;
  int64_t block = 0;
  int64_t shared = 0;
  bool operator==(const Launch&) const = default;
};

struct KernelSource {
  std::string name;
  std::string code;               // the kernel's function, in the backend's language
  std::vector<std::string> args;  // the buffers args[i] points to, in order
  bool vectorized = false;
  bool parallel = false;
  // (written, read) buffer pairs that may share memory: the kernel reads the second only at the
  // element it then writes the first, before writing it. When the read buffer dies at this
  // kernel, the wrapper writes the result into it (Inductor's in-place buffers).
  std::vector<std::pair<std::string, std::string>> inplace;
  // The bounds its indirect loads check; when any, the kernel takes the error record too.
  std::vector<IndexCheck> index_checks;
  Launch launch;
};

// A kernel bound for the wrapper to call (backends/backend.h): a function pointer on the CPU, a
// launch on a GPU. It takes one pointer per argument buffer, then the index error record when
// the kernel has checks.
using KernelCall = std::function<void(void* const* args)>;

}  // namespace coil::codegen
