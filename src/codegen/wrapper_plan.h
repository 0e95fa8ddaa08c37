// The wrapper's plan (Inductor's wrapper code, as data): which buffer lives in which slot, what
// each step runs (a generated kernel by name, or an extern call), which memory each new buffer
// takes over, what dies after each step, and what the graph returns. Made once from the lowered
// program and its schedule; it refers to nothing of theirs, so the graph cache
// (compile/graph_cache.h) can write it down and a later process can run it without lowering.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "codegen/kernel_source.h"
#include "ir/program.h"
#include "schedule/kernel.h"

namespace coil::codegen {

struct WrapperPlan {
  // A program buffer, less its computation.
  struct Slot {
    std::string name;
    ir::BufferKind kind{};
    ir::Layout layout;
    int64_t input_index = -1;            // Input
    Tensor value;                        // Constant
    std::optional<ir::ExternCall> call;  // Extern
  };
  struct Alloc {
    int slot;
    int reuse = -1;  // a dead slot whose memory this buffer takes over
    // The slot dies at this very step, which still reads it: the kernel writes in place.
    bool in_place = false;
  };
  struct Step {
    std::string kernel;                    // a kernel's symbol, or empty for an extern call
    std::vector<int> args;                 // slots, for a kernel
    std::vector<IndexCheck> index_checks;  // when any, the kernel takes an error record
    std::vector<int> symbols;              // the size symbols it reads, by number: it takes them
    std::vector<sym::Expr> divisors;       // its run-time divisors: it takes their dividers
    Launch launch;                         // a GPU kernel's grid and block
    // mode="max-autotune": the kernel's other launches, each a function with its own launch
    // and divisors (KernelSource::alternatives), timed against this one at the first call.
    struct Alternative {
      std::string kernel;
      std::vector<sym::Expr> divisors;
      Launch launch;
    };
    std::vector<Alternative> alternatives;
    int extern_slot = -1;       // the extern call's result
    std::vector<Alloc> allocs;  // before the step
    std::vector<int> releases;  // after it: slots whose memory is dropped
    std::vector<int> dead;      // after it: every slot read for the last time
  };
  struct Output {
    int slot;
    ir::Layout view;
  };
  // Where a dynamic graph's size symbol s<symbol> is read at each call: input `input`'s size in
  // dim `dim`, or its stride there (an eager call's strided input).
  struct SizeSource {
    int symbol;
    int input;
    int dim;
    bool stride = false;
    int64_t value(const std::vector<Tensor>& inputs) const;
  };

  Device device;  // where the buffers live and the kernels run
  std::vector<SizeSource> sizes;
  int num_sizes = 0;  // one more than the largest symbol number (0: a static graph)
  std::vector<Slot> slots;
  std::vector<Step> steps;
  std::vector<Output> outputs;

  size_t kernel_count() const;
};

WrapperPlan plan_wrapper(const ir::Program& program, const schedule::Schedule& schedule,
                         const std::vector<KernelSource>& kernels);

// The plan as readable code, Inductor's wrapper as Python: allocations, reuses, calls, frees
// (the output_code log).
std::string render_wrapper(const WrapperPlan& plan);

}  // namespace coil::codegen
