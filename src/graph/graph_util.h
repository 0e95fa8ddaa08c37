// Helpers private to the graph IR's own files (graph, verifier, printer, parser).
#pragma once

#include "graph/graph.h"

namespace coil::detail_graph {

bool is_identifier(const std::string& s);
// Python keywords and the words the printed text uses itself (coil, self, inf, nan).
bool is_reserved_name(const std::string& s);
// A node's arguments as run_meta takes them: each node becomes a meta_tensor proxy.
std::vector<Arg> meta_args(const std::vector<NodeArg>& args);
// Converts an argument to the alternative parse_literal gives for its schema type.
void canonicalize(NodeArg& a, const ArgSchema& s);
// Replaces every use of `from` in `args` by `to`.
void substitute(std::vector<NodeArg>& args, const Node* from, Node* to);
// What a node's meta should be, from its arguments (or its value).
std::vector<TensorMeta> compute_meta(const Node& n);

}  // namespace coil::detail_graph
