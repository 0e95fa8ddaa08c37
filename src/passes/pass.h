// The pass manager: graph passes grouped by where they run in the pipeline (Inductor's
// pre_grad / joint_graph / post_grad), each group repeated until it reaches a fixpoint.
#pragma once

#include <string>
#include <vector>

#include "debug/timeline.h"
#include "graph/graph.h"

namespace coil {

// A graph pass rewrites the graph in place and reports whether it changed anything (as
// XLA's HloPassInterface::Run): the pass manager repeats a group until no pass does.
struct Pass {
  const char* name;
  bool (*run)(Graph&);
};

// Runs `passes` in order, repeating the whole list until a round changes nothing, and returns
// whether anything changed. Verifies the graph after every pass that changed it. Logs each
// pass's outcome and time (COIL_LOGS=passes) and the graph after each change
// (COIL_LOGS=passes_graphs), every line prefixed with `log_prefix`. A group that still changes
// the graph after a bounded number of rounds is a bug in its passes (InternalError): two of
// them undo each other. With a `timeline`, each pass run is a span in it (the compile
// timeline shows every pass of every round).
bool run_pass_group(Graph& g, const char* group, const std::vector<Pass>& passes,
                    const std::string& log_prefix, debug::Timeline* timeline = nullptr);

// On the captured graph, before autograd: clean-ups and canonical forms that make the graph
// smaller to differentiate, and written-out attention as one attention call.
std::vector<Pass> pre_grad_passes();
// On the joint forward+backward graph: the clean-ups, which the backward graph's duplicated
// and dead computations need most.
std::vector<Pass> joint_graph_passes();
// On each forward and backward graph after decompositions: the clean-ups, then the pattern
// rewrites into fused library calls (addmm, addmm_relu).
std::vector<Pass> post_grad_passes();
// With CompileOptions::options["freezing"], first on an inference graph: what assumes the
// captured tensors never change (batch norm folded into convolutions).
std::vector<Pass> freezing_passes();

}  // namespace coil
