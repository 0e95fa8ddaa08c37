// The wrapper (Inductor's wrapper code): what runs a compiled graph. It walks its plan
// (wrapper_plan.h): binds the inputs, allocates buffers (reusing the memory of buffers whose
// last reader has run), calls the generated kernels and the extern calls in order, and returns
// the outputs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <coil/tensor.h>

#include "codegen/wrapper_plan.h"
#include "jit/library.h"

namespace coil::codegen {

class Wrapper {
 public:
  // `library` holds the plan's kernels (null when it has none).
  Wrapper(WrapperPlan plan, std::shared_ptr<const jit::Library> library);

  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;
  const WrapperPlan& plan() const { return plan_; }
  // The plan as readable code: allocations, reuses, calls, frees (the output_code log).
  const std::string& text() const { return plan_.text; }

 private:
  using KernelFn = void (*)(void* const*);

  static Tensor view_of(const Tensor& base, const ir::Layout& view);

  WrapperPlan plan_;
  std::shared_ptr<const jit::Library> library_;
  std::vector<KernelFn> fns_;  // per step: the kernel, or null for an extern call
  // Per extern step, per argument: the slots of its tensors.
  std::vector<std::vector<std::vector<int>>> extern_arg_slots_;
};

// The source of a schedule's kernels: the prelude, then one function per kernel.
std::string cpp_source(const std::vector<KernelSource>& kernels);

}  // namespace coil::codegen
