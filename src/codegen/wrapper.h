// The wrapper (Inductor's wrapper code): what runs a compiled graph. It walks its plan
// (wrapper_plan.h): binds the inputs, allocates buffers (reusing the memory of buffers whose
// last reader has run), calls the generated kernels and the extern calls in order, and returns
// the outputs.
#pragma once

#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <coil/tensor.h>

#include "codegen/wrapper_plan.h"
#include "jit/library.h"

namespace coil::codegen {

// The library that holds a graph's kernels, perhaps still being compiled (invalid when the
// graph has no kernels).
using LibraryFuture = std::shared_future<std::shared_ptr<const jit::Library>>;
LibraryFuture ready(std::shared_ptr<const jit::Library> library);

class Wrapper {
 public:
  // The first call that reaches a kernel waits for `library` (and rethrows its compile error):
  // the extern calls before it run while the compiler does.
  Wrapper(WrapperPlan plan, LibraryFuture library);

  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;
  const WrapperPlan& plan() const { return plan_; }
  // The plan as readable code: allocations, reuses, calls, frees (the output_code log).
  const std::string& text() const { return plan_.text; }

 private:
  using KernelFn = void (*)(void* const*);

  static Tensor view_of(const Tensor& base, const ir::Layout& view);
  void bind_kernels() const;

  WrapperPlan plan_;
  LibraryFuture library_;
  mutable std::once_flag bound_;
  // Per step: the kernel (bound by the first call that reaches one), or null for an extern.
  mutable std::vector<KernelFn> fns_;
  // Per extern step, per argument: the slots of its tensors.
  std::vector<std::vector<std::vector<int>>> extern_arg_slots_;
};

// The source of a schedule's kernels: the prelude, then one function per kernel.
std::string cpp_source(const std::vector<KernelSource>& kernels);

}  // namespace coil::codegen
