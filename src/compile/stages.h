// The compiler's stages, one function each, in the order compile_fx runs them (Inductor's
// pre_grad, joint_graph and post_grad passes, GraphLowering, the Scheduler, codegen and the
// wrapper). Each stage is a span of the compile's timeline, logs what it made (COIL_LOGS) and
// leaves its artifact in the debug folder. compile_fx, the `coil` tool and the tests all call
// these, so the order is written once: in compile_fx.cpp.
#pragma once

#include <vector>

#include "aot/joint_graph.h"
#include "aot/partitioner.h"
#include "backends/backend.h"
#include "codegen/kernel_source.h"
#include "codegen/wrapper_plan.h"
#include "debug/compile_trace.h"
#include "graph/graph.h"
#include "ir/program.h"
#include "schedule/kernel.h"

namespace coil::stages {

// The graph stages, in place. pre_grad: on the captured graph, before autograd (clean-ups and
// canonical forms, written-out attention as one call). decompositions: composite ops into
// primitives. joint_graph: on a training step's joint forward+backward graph. post_grad: on
// each graph that goes on to lowering (clean-ups, then fused library patterns).
void pre_grad(Graph& g, debug::CompileTrace& trace);
void decompositions(Graph& g, debug::CompileTrace& trace);
void joint_graph(Graph& g, debug::CompileTrace& trace);
void post_grad(Graph& g, debug::CompileTrace& trace);
// options["freezing"]: before pre_grad on an inference graph, the passes that assume captured
// tensors never change (Inductor's freezing).
void freezing(Graph& g, debug::CompileTrace& trace);

// An inference graph's graph stages in order: pre_grad, decompositions, post_grad. (A training
// step's order is compile_fx_training's: autograd, decompositions, joint_graph and partition
// come between.)
void graph_stages(Graph& g, debug::CompileTrace& trace);

// A training step's: the joint forward+backward graph of `g` (AOTAutograd's trace of the
// forward and its derivative rules; `requires_grad` per placeholder, the first `num_results`
// outputs the function's results), then its split into a forward that saves what the backward
// reads and that backward (the min-cut partitioner).
aot::JointGraph autograd(const Graph& g, const std::vector<bool>& requires_grad, size_t num_results,
                         debug::CompileTrace& trace);
aot::Partition partition(const aot::JointGraph& joint, debug::CompileTrace& trace);

// Graph -> loop IR, with `backend` deciding which ops are library calls.
ir::Program lowering(const Graph& g, const backends::DeviceBackend& backend,
                     debug::CompileTrace& trace);
// Loop IR -> kernels, with every fusion decision and its reason.
schedule::Schedule scheduling(const ir::Program& program, debug::CompileTrace& trace);
// Kernels -> source in the backend's language, one per kernel. With the lowered graph `g`, the
// debug folder's diagram shows which node fused into which kernel. With `autotune`
// (mode="max-autotune") each kernel also carries its other launches (KernelSource::alternatives).
std::vector<codegen::KernelSource> codegen(const Graph& g, const ir::Program& program,
                                           const schedule::Schedule& sched,
                                           const backends::DeviceBackend& backend,
                                           debug::CompileTrace& trace, bool autotune = false);
// The wrapper's plan: buffers, their reuse, the order of kernels and library calls.
codegen::WrapperPlan wrapper(const ir::Program& program, const schedule::Schedule& sched,
                             const std::vector<codegen::KernelSource>& kernels,
                             debug::CompileTrace& trace);

}  // namespace coil::stages
