// coil explain: kernel by kernel, which graph nodes and buffers went into it and every fusion
// decision the scheduler made about it, with its reason (the `fusion` log, organised).
#include <algorithm>
#include <cctype>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "commands.h"
#include "graph_file.h"
#include "compile/kernel_diagram.h"
#include "schedule/placement.h"
#include "stages.h"
#include "text.h"

namespace coil::tool {

namespace {

class Explainer {
 public:
  Explainer(const Graph& g, const Pipeline::Scheduled& s) : s_(s) {
    for (const Node* n : g.nodes()) {
      position_[n->name()] = static_cast<int>(position_.size());
      if (n->kind() == NodeKind::Call) calls_.push_back(n->name());
    }
  }

  void kernel(int k) {
    const schedule::Kernel& kernel = s_.schedule.kernels[k];
    std::cout << kernel.name << ": "
              << (kernel.is_reduction() ? "reduction over " + sym_shape_str(kernel.outer) + " x " +
                                              sym_shape_str(kernel.inner)
                                        : "pointwise over " + sym_shape_str(kernel.outer))
              << "\n";
    std::vector<std::string> nodes, buffers;
    for (const schedule::KernelNode& n : kernel.nodes) {
      const ir::Buffer& b = s_.program->buffer(n.buffer);
      nodes.insert(nodes.end(), b.origins.begin(), b.origins.end());
      buffers.push_back(
          n.buffer + ": " +
          (n.reduce ? std::string(ir::reduce_kind_name(*n.reduce)) + " reduction"
                    : std::string("pointwise")) +
          (n.inner && !n.reduce && kernel.is_reduction() ? " inside the reduction loop" : "") +
          (n.store ? ", stored (read later or returned)" : ", kept in registers") + "; from " +
          nodes_text(b.origins));
    }
    std::cout << "  graph nodes: " << nodes_text(nodes) << "\n  buffers:\n";
    for (const std::string& b : buffers) std::cout << "    " << b << "\n";
    std::cout << "  decisions:\n";
    for (const schedule::FusionDecision& d : s_.schedule.decisions)
      if (d.kernel == s_.schedule.kernels[k].name) std::cout << "    " << d.str() << "\n";
  }

  void extern_call(const std::string& buffer) {
    const ir::Buffer& b = s_.program->buffer(buffer);
    std::cout << "extern " << b.name << " = " << op_name(b.call->op) << ": " << b.call->reason
              << "\n  graph nodes: " << nodes_text(b.origins) << "\n";
  }

  // Call nodes in no buffer's origins: views of a buffer, which compute nothing themselves
  // (their readers load through them).
  std::vector<std::string> unplaced() const {
    std::vector<std::string> out;
    for (const std::string& n : calls_)
      if (!placed_.count(n)) out.push_back(n);
    return out;
  }

 private:
  // Node names in graph order, each once; they count as placed.
  std::string nodes_text(std::vector<std::string> names) {
    std::sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
      return position_[a] < position_[b];
    });
    names.erase(std::unique(names.begin(), names.end()), names.end());
    placed_.insert(names.begin(), names.end());
    return join(names, "(none)");
  }

  const Pipeline::Scheduled& s_;
  std::map<std::string, int> position_;
  std::vector<std::string> calls_;
  std::set<std::string> placed_;
};

int run_explain(const Args& args) {
  std::string name = graph_name(args.file);
  Graph g = load_graph(args.file);
  Pipeline pipeline(name, g);
  pipeline.graph_stages(g);
  Pipeline::Scheduled s = pipeline.lower_and_schedule(g);
  if (args.has("--dot")) {  // the graph, each node coloured by the kernel it fused into
    std::cout << kernel_diagram(g, *s.program, s.schedule);
    return 0;
  }
  int64_t kernels = static_cast<int64_t>(s.schedule.kernels.size());
  int64_t externs = static_cast<int64_t>(s.schedule.steps.size()) - kernels;
  std::cout << name << ": " << plural(kernels, "kernel") << " and "
            << plural(externs, "extern call")
            << " over the graph after the graph stages ('coil lower' prints it), in the order "
               "they run\n\n";
  Explainer explain(g, s);
  for (const schedule::Step& step : s.schedule.steps) {
    if (step.kernel >= 0)
      explain.kernel(step.kernel);
    else
      explain.extern_call(step.buffer);
    std::cout << "\n";
  }
  std::vector<std::string> rest = explain.unplaced();
  if (!rest.empty())
    std::cout << "views, computing nothing themselves (their readers load through them): "
              << join(rest) << "\n";
  return 0;
}

}  // namespace

Command explain_command() {
  return {"explain",
          "say which graph nodes fused into which kernel, and why",
          "coil explain FILE [--dot]",
          "Runs the pipeline up to scheduling and goes through the kernels and extern calls in\n"
          "the order they run. For each kernel: its loops, the graph nodes it computes, its\n"
          "buffers (stored, or kept in registers when nothing outside the kernel reads them) and\n"
          "every fusion decision about it with its reason: the buffer that started it, those\n"
          "fused into it and those it refused. For each extern call: the op and why it runs a\n"
          "library or eager kernel.",
          {{"--dot", nullptr,
            "write the graph in Graphviz's format instead, each node coloured by its kernel"}},
          run_explain};
}

}  // namespace coil::tool
