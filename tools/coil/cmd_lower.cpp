// coil lower: the loop IR before and after fusion (the seed's run_inductor_ir_trace.py, the
// ir_pre_fusion and ir_post_fusion logs).
#include <iostream>

#include "commands.h"
#include "graph/printer.h"
#include "graph_file.h"
#include "stages.h"
#include "text.h"

namespace coil::tool {

namespace {

int run_lower(const Args& args) {
  Graph g = load_graph(args.file);
  Pipeline pipeline(graph_name(args.file), g);
  pipeline.graph_stages(g);
  if (!args.has("--no-graph"))
    std::cout << "== graph after pre_grad passes, decompositions, post_grad passes\n"
              << print_graph(g) << "\n";
  Pipeline::Scheduled s = pipeline.lower_and_schedule(g);
  std::cout << "== loop IR before fusion (src/lower/)\n" << ir::to_string(*s.program) << "\n";
  int64_t kernels = static_cast<int64_t>(s.schedule.kernels.size());
  int64_t externs = static_cast<int64_t>(s.schedule.steps.size()) - kernels;
  std::cout << "== after fusion (src/schedule/): " << plural(kernels, "kernel") << ", "
            << plural(externs, "extern call") << ", in the order they run\n";
  for (const schedule::Step& step : s.schedule.steps) {
    if (step.kernel >= 0) {
      std::cout << schedule::to_string(s.schedule.kernels[step.kernel]);
    } else {
      const ir::Buffer& b = s.program->buffer(step.buffer);
      std::cout << b.name << " = extern " << op_name(b.call->op) << "  # " << b.call->reason
                << "\n";
    }
  }
  return 0;
}

}  // namespace

Command lower_command() {
  return {"lower",
          "lower a graph to the loop IR and show it before and after fusion",
          "coil lower FILE [--no-graph]",
          "Runs the graph stages of the pipeline (pre_grad passes, decompositions, post_grad\n"
          "passes) and prints the graph they leave; lowers it to the loop IR and prints every\n"
          "buffer with its layout and body (Pointwise, Reduction) or extern call; schedules the\n"
          "buffers into kernels and prints each kernel over its loop variables, with the extern\n"
          "calls between them, in the order they run. 'coil explain' says why things fused.",
          {{"--no-graph", nullptr, "leave out the graph the graph stages produced"}},
          run_lower};
}

}  // namespace coil::tool
