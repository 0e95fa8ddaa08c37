// Graph -> loop IR: every node of a (decomposed) graph becomes loaders, buffers and extern
// calls (Inductor's GraphLowering).
#pragma once

#include "graph/graph.h"
#include "ir/program.h"

namespace coil::lower {

// Ops with no lowering run their eager kernel as an extern call, so every graph lowers.
ir::Program lower_graph(const Graph& g);

}  // namespace coil::lower
