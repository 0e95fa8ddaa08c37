#include "compile_fx.h"

#include <chrono>

#include "capture/counters.h"
#include "debug/log.h"
#include "graph/interpreter.h"
#include "graph/printer.h"

namespace coil {

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

capture::CompiledGraph compile_fx(std::shared_ptr<const Graph> graph, const CompileOptions& options,
                                  const std::string& log_prefix) {
  auto t0 = std::chrono::steady_clock::now();
  capture::bump(capture::Counter::compiles);
  verify(*graph);
  debug::log("graph_code", log_prefix, "captured graph:\n" + print_graph(*graph));

  // Stages still to come (their issues): autograd's joint graph and partitioner,
  // decompositions, graph passes, lowering to the loop IR, fusion, code generation and the
  // JIT. Until they land every backend runs the captured graph on the eager kernels, which is
  // exactly what "eager" promises and the reference the others will be checked against.
  capture::CompiledGraph cg;
  cg.graph = graph;
  cg.run = [graph](const std::vector<Tensor>& inputs) { return interpret(*graph, inputs); };

  debug::log("timeline", log_prefix,
             "compile " + options.name + ": " + std::to_string(ms_since(t0)) + " ms (backend " +
                 options.backend + ")");
  return cg;
}

}  // namespace coil
