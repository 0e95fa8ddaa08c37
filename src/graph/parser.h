// Reading the text print_graph writes back into a Graph, so pass tests can be text in, text
// out, and the `coil` tool can load a graph from a file.
#pragma once

#include <map>
#include <string>

#include "graph/graph.h"

namespace coil {

// Parses print_graph's format (see printer.h). Every call's meta is recomputed with its meta
// function and must match the annotation when there is one (annotations are optional on call
// and getitem lines, required on inputs, parameters and constants). `parameters` maps a
// parameter's target ("fc.weight") to its tensor, whose meta must match the annotation; a
// parameter without one becomes a data-less proxy (enough to print, verify and lower, not to
// interpret). Malformed text throws coil::Error naming the line and column.
Graph parse_graph(const std::string& text, const std::map<std::string, Tensor>& parameters = {});

}  // namespace coil
