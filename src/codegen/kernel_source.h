// A generated kernel as the wrapper and the code cache see it, whatever the backend: its name,
// its source, the buffers it takes, which of them it may write in place, and the index checks
// it reports.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "sym/expr.h"

namespace coil::codegen {

// A bound an indirect load's index value is checked against. A kernel that has any takes a
// pointer to an error record after its buffers (i64[2]: the failed check's position in the
// kernel's list plus one, and the value); the wrapper turns a record into a coil::Error (on a
// GPU, the backend reads the record once the kernel is done, at the host's next wait).
struct IndexCheck {
  std::string op;   // named in the error
  sym::Expr bound;  // a size, perhaps known only at run time
  bool operator==(const IndexCheck&) const = default;
};
// The coil::Error text of a failed check: `op`'s index `value` outside [0, bound).
inline std::string index_error_message(const std::string& op, int64_t value, int64_t bound) {
  return op + ": index " + std::to_string(value) + " is out of range for a dimension of size " +
         std::to_string(bound) + "; indices must lie in [0, " + std::to_string(bound) + ")";
}
// The bound as a C argument: a constant with its LL suffix, a size expression parenthesised.
inline std::string bound_text(sym::Expr bound) {
  if (bound->is_const()) return std::to_string(bound->value()) + "LL";
  return "(" + sym::to_c(bound) + ")";
}

// How a GPU kernel is launched: `grid` blocks of `block` threads, with `shared` bytes of dynamic
// shared memory (all 0 for CPU kernels). The grid may depend on sizes known only at run time.
struct Launch {
  sym::Expr grid = sym::constant(0);
  int64_t block = 0;
  int64_t shared = 0;
  bool operator==(const Launch&) const = default;
};

struct KernelSource {
  std::string name;
  // The module function it runs: its own (named `name`), or an identical earlier kernel's
  // (shared_kernels.h), whose code the module then holds alone.
  std::string function;
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
  // The size symbols its code reads (a dynamic graph's s0, s1, ...), in order.
  std::vector<sym::Expr> symbols;
  // Run-time divisors of its indices (a GPU kernel's): it takes a divider for each after its
  // sizes, computed by the launch from the call's sizes (the prelude's coil_udiv).
  std::vector<sym::Expr> divisors;
  Launch launch;
  // mode="max-autotune": the same kernel with other launches (`<name>_at<n>`, n from 1), which
  // the first call times against this one; the wrapper keeps the fastest. Each has the same
  // arguments and symbols; its own code, launch and divisors.
  std::vector<KernelSource> alternatives;

  // The module function the wrapper calls for it.
  const std::string& function_name() const { return function.empty() ? name : function; }
  // Whether the module holds its code (no earlier kernel's runs in its place).
  bool defines_function() const { return function_name() == name; }
};

// A kernel bound for the wrapper to call (backends/backend.h): a function pointer on the CPU, a
// launch on a GPU. It takes one pointer per argument buffer, then the index error record when
// the kernel has checks, then, when it reads size symbols, the call's symbol values (an int64
// array, s<k> at [k]). `sizes` is that array too (null in a static graph): a GPU launch passes
// the values, its dividers and its grid computed from them.
using KernelCall = std::function<void(void* const* args, const int64_t* sizes)>;

}  // namespace coil::codegen
