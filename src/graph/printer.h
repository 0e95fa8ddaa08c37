// Writing a graph down: the text of TORCH_LOGS=graph_code (which parse_graph reads back) and
// a Graphviz diagram.
#pragma once

#include <iosfwd>
#include <map>
#include <set>
#include <string>

#include "graph/graph.h"

namespace coil {

// "f32[8, 16][16, 1]cpu": dtype, sizes, strides, device; a non-zero storage offset follows as
// "+4" (PyTorch's annotations leave it out, but a view's meta depends on it).
std::string meta_str(const TensorMeta& m);
// In a dynamic graph: "f32[s0, 768][768, 1]cpu", the symbolic layout with the meta's dtype and
// device (the meta alone when the layout is static).
std::string meta_str(const TensorMeta& m, const SymLayout& l);

// The whole graph, one line per node:
//   def forward(self, x: "f32[8, 16][16, 1]cpu", y: "f32[16][1]cpu"):
//       w: "f32[16, 16][16, 1]cpu" = coil.parameter("fc.weight")
//       c: "i64[2][1]cpu" = coil.constant([3, 4])
//       sin: "f32[8, 16][16, 1]cpu" = coil.sin(x)
//       split = coil.split(sin, 4)
//       getitem: "f32[4, 16][16, 1]cpu" = split[0]
//       sum_1: "f32[1, 1][1, 1]cpu" = coil.sum(getitem, keepdim=True)
//       return (sin, sum_1)
// Arguments equal to their schema default are left out; once one is left out, the later
// ones are written as keywords. A dynamic graph prints its sizes over symbols ("f32[s0, 768]")
// and, with `hints`, a first line "# hints: s0=8 s1=64" (their values at capture, which
// parse_graph needs); without it, the text is the same for every size (a cache key).
std::string print_graph(const Graph& g, bool hints = true);
// One node's line, without indentation (a placeholder prints as it reads in the header).
std::string print_node(const Node& n);
std::ostream& operator<<(std::ostream& os, const Graph& g);

// How to_dot draws a graph beyond its nodes and edges. Nodes in `group` are filled with the
// group's colour and drawn inside a cluster per group (the kernel the fusion stage put them
// in), titled by `group_label` (default "group k"); `note` adds a line to a node's box;
// `marked` nodes (extern calls) get a grey fill and a double border. With any group label or
// marked node, a legend box names what each colour means.
struct DotStyle {
  DotStyle() = default;  // not an aggregate: to_dot(g, {{a, 0}}) means the group map
  std::map<const Node*, int> group;
  std::map<int, std::string> group_label;
  std::map<const Node*, std::string> note;
  std::set<const Node*> marked;
  std::string marked_label = "extern call";  // the legend's entry for marked nodes
  std::string title;                         // drawn above the graph
};

// Graphviz: one box per node (name, op, annotation), one edge per data dependency.
std::string to_dot(const Graph& g, const DotStyle& style);
std::string to_dot(const Graph& g, const std::map<const Node*, int>& group = {});

}  // namespace coil
