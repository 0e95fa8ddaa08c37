// The compiler's stages as the tool runs them, one call per stage, each a call of the
// library's own stage function in the order src/compile_fx.cpp runs them. `coil run` calls
// compile_fx itself; the other commands stop after the stage they show.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/cpp_kernel.h"
#include "codegen/wrapper.h"
#include "graph/graph.h"
#include "ir/program.h"
#include "jit/library.h"
#include "schedule/kernel.h"

namespace coil::tool {

// The graph stages: the pre_grad pass group, decompositions, the post_grad pass group.
void run_graph_stages(Graph& g, const std::string& log_prefix);

// Lowering to the loop IR, then scheduling (fusion) into kernels.
struct Scheduled {
  std::shared_ptr<const ir::Program> program;
  schedule::Schedule schedule;
};
Scheduled lower_and_schedule(const Graph& g);

// Code generation, the JIT and the wrapper. The wrapper binds the kernels' symbols, so
// showing it needs the source compiled (or found in the code cache).
struct Generated {
  std::vector<codegen::KernelSource> kernels;
  std::string source;                           // the compile unit: prelude, then the kernels
  std::shared_ptr<const jit::Library> library;  // null when there is no kernel
  std::shared_ptr<const codegen::Wrapper> wrapper;
};
Generated generate_code(const Scheduled& s, const std::string& name);

}  // namespace coil::tool
