// Where each graph node's computation ended up after fusion: the kernels whose loops compute
// it, or the extern call that runs it. Joins the origins lowering records on each buffer
// (ir::Buffer::origins) with the buffers each kernel computes; the graph diagram of the debug
// folder colours nodes by it (compile/kernel_diagram.h).
#pragma once

#include <map>
#include <string>
#include <vector>

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

}  // namespace coil::schedule
