// The compiler's middle stages on a graph written as text, for tests that read the loop IR, the
// schedule or a kernel's source: parse, lower, schedule.
#pragma once

#include <string>

#include "graph/parser.h"
#include "lower/lower_graph.h"
#include "schedule/scheduler.h"

namespace coil::testing_stages {

struct Compiled {
  ir::Program program;
  schedule::Schedule schedule;
};

inline Compiled stages(const std::string& graph_text) {
  Graph g = parse_graph(graph_text);
  Compiled c{lower::lower_graph(g), {}};
  c.schedule = schedule::schedule(c.program);
  return c;
}

}  // namespace coil::testing_stages
