// Graphviz export of a graph: `dot -Tsvg graph.dot > graph.svg`.
#include <sstream>

#include "graph/printer.h"

namespace coil {

namespace {

// Pastel fills that keep black text readable; groups beyond the palette reuse it.
const char* group_colour(int group) {
  static const char* palette[] = {"#a6cee3", "#b2df8a", "#fb9a99", "#fdbf6f", "#cab2d6", "#ffff99",
                                  "#8dd3c7", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69"};
  constexpr int n = sizeof(palette) / sizeof(palette[0]);
  return palette[((group % n) + n) % n];
}

// Marked nodes (extern calls) are grey: no kernel colour, since no generated code runs them.
constexpr const char* kMarkedColour = "#d9d9d9";

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string what_it_is(const Node& n) {
  switch (n.kind()) {
    case NodeKind::Call:
      return std::string("coil.") + op_name(n.op());
    case NodeKind::GetItem:
      return "getitem [" + std::to_string(n.index()) + "]";
    case NodeKind::Parameter:
      return "parameter " + n.target();
    default:
      return node_kind_name(n.kind());
  }
}

std::string label(const Node& n) {
  std::string s = n.name() + "\\n" + escape(what_it_is(n));
  for (const TensorMeta& m : n.meta()) s += "\\n" + meta_str(m);
  return s;
}

}  // namespace

std::string to_dot(const Graph& g, const DotStyle& style) {
  std::vector<Node*> nodes = g.nodes();
  std::map<const Node*, size_t> id;
  for (size_t i = 0; i < nodes.size(); ++i) id[nodes[i]] = i;
  auto group_label = [&](int k) {
    auto it = style.group_label.find(k);
    return it != style.group_label.end() ? escape(it->second) : "group " + std::to_string(k);
  };

  std::ostringstream os;
  os << "digraph graph_ir {\n";
  if (!style.title.empty())
    os << "  label=\"" << escape(style.title) << "\";\n  labelloc=t;\n  fontname=monospace;\n";
  os << "  node [shape=box, style=\"rounded,filled\", fillcolor=white, fontname=monospace];\n";
  auto declare = [&](const Node* n, const char* indent) {
    os << indent << "n" << id[n] << " [label=\"" << label(*n);
    if (auto it = style.note.find(n); it != style.note.end()) os << "\\n" << escape(it->second);
    os << "\"";
    if (auto it = style.group.find(n); it != style.group.end())
      os << ", fillcolor=\"" << group_colour(it->second) << "\"";
    else if (style.marked.count(n))
      os << ", fillcolor=\"" << kMarkedColour << "\"";
    if (style.marked.count(n)) os << ", peripheries=2";
    os << "];\n";
  };
  std::map<int, std::vector<const Node*>> clusters;
  for (const Node* n : nodes) {
    if (auto it = style.group.find(n); it != style.group.end()) {
      clusters[it->second].push_back(n);
    } else {
      declare(n, "  ");
    }
  }
  for (const auto& [k, members] : clusters) {
    os << "  subgraph cluster_" << (k < 0 ? "m" : "") << (k < 0 ? -k : k) << " {\n"
       << "    label=\"" << group_label(k) << "\";\n    style=dashed;\n";
    for (const Node* n : members) declare(n, "    ");
    os << "  }\n";
  }
  for (const Node* n : nodes)
    for (const Node* in : n->inputs()) os << "  n" << id[in] << " -> n" << id[n] << ";\n";
  // The key: one swatch per group, and one for marked nodes. Its nodes are not graph nodes
  // (their ids start with "legend"), and it has no edges.
  if (!style.group_label.empty() || !style.marked.empty()) {
    os << "  subgraph cluster_legend {\n    label=\"legend\";\n    style=solid;\n";
    for (const auto& [k, text] : style.group_label)
      os << "    legend_" << (k < 0 ? "m" : "") << (k < 0 ? -k : k) << " [label=\"" << escape(text)
         << "\", fillcolor=\"" << group_colour(k) << "\"];\n";
    if (!style.marked.empty())
      os << "    legend_marked [label=\"" << escape(style.marked_label) << "\", fillcolor=\""
         << kMarkedColour << "\", peripheries=2];\n";
    os << "  }\n";
  }
  os << "}\n";
  return os.str();
}

std::string to_dot(const Graph& g, const std::map<const Node*, int>& group) {
  DotStyle style;
  style.group = group;
  return to_dot(g, style);
}

}  // namespace coil
