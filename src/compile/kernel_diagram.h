// The debug folder's graph diagram: the lowered graph with each node coloured by the kernel it
// fused into (schedule/placement.h), library and eager calls marked, and a legend naming each
// kernel as output_code does.
#pragma once

#include <string>

#include "graph/graph.h"
#include "ir/program.h"
#include "schedule/kernel.h"

namespace coil {

// Graphviz text of `g` (the graph that was lowered).
std::string kernel_diagram(const Graph& g, const ir::Program& program, const schedule::Schedule& s);

}  // namespace coil
