// The wrapper (Inductor's wrapper code): what runs a compiled graph. It binds the inputs,
// allocates buffers (reusing the memory of buffers whose last reader has run), calls the
// generated kernels and the extern calls in schedule order, and returns the outputs. The
// plan is fixed at compile time; a call only walks it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <coil/tensor.h>

#include "codegen/cpp_kernel.h"
#include "jit/library.h"
#include "schedule/kernel.h"

namespace coil::codegen {

class Wrapper {
 public:
  Wrapper(const ir::Program& program, const schedule::Schedule& schedule,
          const std::vector<KernelSource>& kernels, std::shared_ptr<const jit::Library> library);

  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;
  // The plan as readable code: allocations, reuses, calls, frees (the output_code log).
  const std::string& text() const { return text_; }

 private:
  using KernelFn = void (*)(void* const*);
  struct Alloc {
    int slot;
    int reuse = -1;  // a dead slot whose memory this buffer takes over
    // The slot dies at this very step, which still reads it: the kernel writes in place.
    bool in_place = false;
  };
  struct StepPlan {
    KernelFn fn = nullptr;
    std::vector<int> args;                 // slots, for a kernel
    std::vector<IndexCheck> index_checks;  // when any, the kernel takes an error record
    const ir::Buffer* extern_buffer = nullptr;
    int extern_slot = -1;
    std::vector<std::vector<int>> extern_arg_slots;  // per argument: the slots of its tensors
    std::vector<Alloc> allocs;                       // before the step
    std::vector<int> releases;                       // after it
  };
  struct OutputPlan {
    int slot;
    ir::Layout view;
  };

  static Tensor view_of(const Tensor& base, const ir::Layout& view);

  std::shared_ptr<const jit::Library> library_;
  std::vector<const ir::Buffer*> buffers_;  // by slot
  std::map<std::string, int> slot_of_;
  std::vector<StepPlan> steps_;
  std::vector<OutputPlan> outputs_;
  std::string text_;
};

// The source of a schedule's kernels: the prelude, then one function per kernel.
std::string cpp_source(const std::vector<KernelSource>& kernels);

}  // namespace coil::codegen
