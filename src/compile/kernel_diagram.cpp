#include "compile/kernel_diagram.h"

#include "graph/printer.h"
#include "schedule/placement.h"

namespace coil {

namespace {

// "poi_fused_cos_mul_sin_add_0: pointwise over [1024], 5 nodes": enough to match the legend with
// the output code.
std::string describe(const schedule::Kernel& k, size_t graph_nodes) {
  std::string what =
      k.is_reduction() ? "reduction over " + sym_shape_str(k.outer) + " x " + sym_shape_str(k.inner)
                       : "pointwise over " + sym_shape_str(k.outer);
  return k.name + ": " + what + ", " + std::to_string(graph_nodes) + " graph node" +
         (graph_nodes == 1 ? "" : "s");
}

}  // namespace

std::string kernel_diagram(const Graph& g, const ir::Program& program,
                           const schedule::Schedule& s) {
  std::map<std::string, schedule::NodePlacement> placed = schedule::place_nodes(program, s);
  DotStyle style;
  std::vector<size_t> members(s.kernels.size(), 0);
  size_t externs = 0;
  for (const Node* n : g.nodes()) {
    if (n->kind() != NodeKind::Call) continue;
    auto it = placed.find(n->name());
    if (it == placed.end()) continue;
    const schedule::NodePlacement& p = it->second;
    if (p.extern_call) {
      style.marked.insert(n);
      style.note[n] = "extern: " + p.extern_reason;
      ++externs;
    } else if (!p.kernels.empty()) {
      // A node recomputed in several kernels takes the first one's colour; its box says so.
      style.group[n] = p.kernels.front();
      for (int k : p.kernels) ++members[k];
      if (p.kernels.size() > 1) {
        std::string also;
        for (size_t i = 1; i < p.kernels.size(); ++i)
          also += (i > 1 ? ", " : "") + s.kernels[p.kernels[i]].name;
        style.note[n] = "also recomputed in " + also;
      }
    }
  }
  for (size_t k = 0; k < s.kernels.size(); ++k)
    style.group_label[static_cast<int>(k)] = describe(s.kernels[k], members[k]);
  style.marked_label = "extern call (library or eager kernel)";
  style.title = "post-grad graph: " + std::to_string(s.kernels.size()) + " generated kernel" +
                (s.kernels.size() == 1 ? "" : "s") + ", " + std::to_string(externs) +
                " extern call" + (externs == 1 ? "" : "s");
  return to_dot(g, style);
}

}  // namespace coil
