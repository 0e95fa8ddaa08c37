// Compiled training (AOTAutograd): a captured graph whose inputs or parameters require grad is
// turned into a joint graph (joint_graph.h), partitioned into a forward and a backward graph
// (partitioner.h), and both are compiled (compile_fx.cpp runs these steps in order). Calling
// the result runs the compiled forward and leaves on its results a backward node that runs the
// compiled backward, so `loss.backward()` works as in eager.
#pragma once

#include "aot/joint_graph.h"
#include "aot/partitioner.h"
#include "capture/tracer.h"

namespace coil::aot {

// The training step's callable, from the captured `graph`, its joint graph, the partition of
// that and the two halves compiled. Under create_graph (a second derivative), the backward
// replays `graph` through eager autograd instead of running compiled code.
capture::CompiledGraph training_function(std::shared_ptr<const Graph> graph,
                                         const CompileOptions& options, const JointGraph& joint,
                                         const Partition& part, capture::CompiledGraph forward,
                                         capture::CompiledGraph backward);

// A captured segment (before or after a graph break) run through the dispatcher, node by node,
// so eager autograd records it: what segments do while gradients are needed.
capture::CompiledGraph eager_autograd_graph(std::shared_ptr<const Graph> graph);

}  // namespace coil::aot
