// The compiler's stages as the tool runs them: the library's own stage functions
// (src/compile/stages.h), in the order compile_fx runs them. `coil run` calls compile_fx itself;
// the other commands stop after the stage they show.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "codegen/kernel_source.h"
#include "codegen/wrapper.h"
#include "debug/compile_trace.h"
#include "graph/graph.h"
#include "ir/program.h"
#include "schedule/kernel.h"

namespace coil::tool {

// One graph's way through the stages: its trace (logs with the graph's name as prefix, the
// debug folder when COIL_COMPILE_DEBUG is set) and the device backend of its tensors.
class Pipeline {
 public:
  explicit Pipeline(const std::string& name);

  // The graph stages: pre-grad passes, decompositions, post-grad passes.
  void graph_stages(Graph& g);

  // Lowering to the loop IR, then scheduling (fusion) into kernels.
  struct Scheduled {
    std::shared_ptr<const ir::Program> program;
    schedule::Schedule schedule;
  };
  Scheduled lower_and_schedule(const Graph& g);

  // Code generation, the JIT and the wrapper. The wrapper binds the kernels, so showing it
  // needs the source compiled (or found in the code cache).
  struct Generated {
    std::vector<codegen::KernelSource> kernels;
    std::string source;  // the compile unit: prelude, then the kernels
    std::shared_ptr<const codegen::Wrapper> wrapper;
  };
  Generated generate_code(const Graph& g, const Scheduled& s);

  const backends::DeviceBackend& backend() const { return backend_; }

 private:
  std::string name_;
  debug::CompileTrace trace_;
  const backends::DeviceBackend& backend_;
};

}  // namespace coil::tool
