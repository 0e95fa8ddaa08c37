// Where each graph node's computation ended up after fusion: the kernels whose loops compute
// it, or the extern call that runs it. Joins the origins lowering records on each buffer
// (ir::Buffer::origins) with the buffers each kernel computes; the graph diagram of the debug
// folder colours nodes by it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "schedule/kernel.h"

namespace coil::schedule {

struct NodePlacement {
  // Indices into Schedule::kernels, ascending. Several when the node was inlined into (and
  // recomputed by) several kernels.
  std::vector<int> kernels;
  bool extern_call = false;
  std::string extern_reason;  // why it runs a library or eager kernel
};

// By graph node name. Nodes that compute nothing (placeholders, views of a buffer) are absent.
std::map<std::string, NodePlacement> place_nodes(const ir::Program& program, const Schedule& s);

// Graphviz text of `g` (the graph that was lowered) with each call node filled with the colour
// of the kernel it fused into, extern calls marked, and a legend naming each kernel.
std::string kernel_diagram(const Graph& g, const ir::Program& program, const Schedule& s);

}  // namespace coil::schedule
