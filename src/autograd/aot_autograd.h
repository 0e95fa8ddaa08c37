// Compiled training (AOTAutograd): a captured graph whose inputs or parameters require grad is
// turned into a joint graph, partitioned into a forward and a backward graph, and both are
// compiled. Calling the result runs the compiled forward and leaves on its results a backward
// node that runs the compiled backward, so `loss.backward()` works as in eager.
#pragma once

#include "capture/tracer.h"
#include "debug/compile_trace.h"

namespace coil::autograd {

// `inputs`: the real inputs of this first call (their requires_grad decides which gradients
// the backward returns). The first `num_results` outputs of `graph` are the function's results;
// the rest are in-place updates of inputs.
capture::CompiledGraph compile_training(std::shared_ptr<const Graph> graph,
                                        const CompileOptions& options, debug::CompileTrace& trace,
                                        const std::vector<Tensor>& inputs, size_t num_results);

// A captured segment (before or after a graph break) run through the dispatcher, node by node,
// so eager autograd records it: what segments do while gradients are needed.
capture::CompiledGraph eager_autograd_graph(std::shared_ptr<const Graph> graph);

}  // namespace coil::autograd
