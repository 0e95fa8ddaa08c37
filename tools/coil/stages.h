// The compiler's stages as the tool runs them: the library's own stage functions
// (src/compile/stages.h), in the order compile_fx runs them. `coil run` calls compile_fx itself;
// the other commands stop after the stage they show.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "codegen/kernel_source.h"
#include "codegen/wrapper_plan.h"
#include "debug/compile_trace.h"
#include "graph/graph.h"
#include "ir/program.h"
#include "schedule/kernel.h"

namespace coil::tool {

// One graph's way through the stages: its trace (logs with the graph's name as prefix, the
// debug folder when COIL_COMPILE_DEBUG is set) and the backend of its tensors' device (a graph
// on cuda:N gets the CUDA backend, also where there is no GPU: its source then compiles with
// NVRTC, and is not loaded).
class Pipeline {
 public:
  Pipeline(const std::string& name, const Graph& g);

  // The graph stages: pre-grad passes, decompositions, post-grad passes.
  void graph_stages(Graph& g);

  // Lowering to the loop IR, then scheduling (fusion) into kernels.
  struct Scheduled {
    std::shared_ptr<const ir::Program> program;
    schedule::Schedule schedule;
  };
  Scheduled lower_and_schedule(const Graph& g);

  // Code generation, the JIT (the source compiled, or found in the code cache, so that what is
  // shown is code that compiles) and the wrapper's plan.
  struct Generated {
    std::vector<codegen::KernelSource> kernels;
    std::string source;   // the compile unit: prelude, then the kernels
    std::string wrapper;  // the plan, as the output_code log prints it
  };
  Generated generate_code(const Graph& g, const Scheduled& s);

  const backends::DeviceBackend& backend() const { return backend_; }

 private:
  std::string name_;
  debug::CompileTrace trace_;
  const backends::DeviceBackend& backend_;
};

}  // namespace coil::tool
