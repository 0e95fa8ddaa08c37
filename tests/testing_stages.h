// The compiler's middle stages on a graph written as text, for tests that read the loop IR, the
// schedule or a kernel's source: parse, then the library's own stage functions
// (compile/stages.h) for lowering and scheduling on the CPU backend.
#pragma once

#include <string>

#include "backends/backend.h"
#include "compile/stages.h"
#include "graph/parser.h"

namespace coil::testing_stages {

struct Compiled {
  ir::Program program;
  schedule::Schedule schedule;
};

inline Compiled lowered_and_scheduled(const Graph& g) {
  debug::CompileTrace trace("test", "test", CompileOptions{}, {});
  Compiled c{coil::stages::lowering(g, backends::backend_for(kCPU), trace), {}};
  c.schedule = coil::stages::scheduling(c.program, trace);
  return c;
}

inline Compiled lowered_and_scheduled(const std::string& graph_text) {
  return lowered_and_scheduled(parse_graph(graph_text));
}

}  // namespace coil::testing_stages
