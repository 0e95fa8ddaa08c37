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
#include "jit/module.h"

namespace coil::codegen {

// The module that holds a graph's kernels, perhaps still being compiled (invalid when the
// graph has no kernels).
using ModuleFuture = std::shared_future<std::shared_ptr<const jit::Module>>;
ModuleFuture ready(std::shared_ptr<const jit::Module> module);
// How a step's kernel is called once its module is loaded (the backend's bind()).
using KernelBinder = std::function<KernelCall(const jit::Module&, const WrapperPlan::Step&)>;

class Wrapper {
 public:
  // The first call that reaches a kernel waits for `module` (and rethrows its compile error),
  // then binds every kernel with `bind`: the extern calls before it run while the compiler does.
  Wrapper(WrapperPlan plan, ModuleFuture module, KernelBinder bind);

  // With `into`, the first output is written there when it is the whole of a buffer the graph
  // allocates with into's geometry (an in-place eager call's tensor); else as without.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, const Tensor* into = nullptr) const;
  const WrapperPlan& plan() const { return plan_; }
  // The plan as readable code: allocations, reuses, calls, frees (the output_code log).
  std::string text() const { return render_wrapper(plan_); }

 private:
  // `t`, an input, in the layout its buffer has in the plan: itself, or a copy laid out so.
  static Tensor as_planned(const Tensor& t, const ir::Layout& layout, const int64_t* sizes);
  static Tensor view_of(const Tensor& base, const ir::Layout& view, const int64_t* sizes);
  // An extern call's result, checked against the layout lowering gave its buffer.
  Tensor checked_result(const Tensor& out, const WrapperPlan::Slot& result,
                        const int64_t* sizes) const;
  void bind_kernels() const;

  struct Call;  // one run's sizes, buffers and the extern calls' later results
  void allocate(const WrapperPlan::Alloc& a, Call& call, const Tensor* into) const;
  void run_kernel(size_t step, Call& call) const;
  void run_extern(size_t step, Call& call) const;

  WrapperPlan plan_;
  ModuleFuture module_;
  KernelBinder bind_;
  mutable std::once_flag bound_;
  // Per step: the kernel (bound by the first call that reaches one), or empty for an extern.
  mutable std::vector<KernelCall> fns_;
  // Per extern step, per argument: the slots of its tensors.
  std::vector<std::vector<std::vector<int>>> extern_arg_slots_;
  // Per step that takes a later result of an earlier step's call: that call's first slot.
  std::vector<int> first_result_slot_;
};

}  // namespace coil::codegen
