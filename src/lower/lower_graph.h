// Graph -> loop IR: every node of a (decomposed) graph becomes loaders, buffers and extern
// calls (Inductor's GraphLowering).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "graph/graph.h"
#include "ir/program.h"

namespace coil::lower {

// Why a node runs as a library call on the target device (a matrix product), or nullopt to
// lower it to loops: the device backend's library_call().
using LibraryCalls = std::function<std::optional<std::string>(const Node&)>;

// Library calls and ops with no lowering run their eager kernel as an extern call, so every
// graph lowers.
ir::Program lower_graph(const Graph& g, const LibraryCalls& library_calls);

}  // namespace coil::lower
