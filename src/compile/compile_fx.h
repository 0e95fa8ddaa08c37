// The backend pipeline: what happens to a captured graph, stage by stage (the analog of
// TorchInductor's compile_fx with AOTAutograd inside it). compile_fx.cpp lists every stage in
// order; each stage is a function of stages.h.
#pragma once

#include <coil/compile.h>

#include "capture/tracer.h"
#include "debug/compile_trace.h"

namespace coil {

// Compiles a captured graph with the backend named in `options` and returns the callable
// that runs it on real inputs (one tensor per placeholder, in order). Each stage is a span of
// `trace`'s timeline and leaves its artifact in the debug folder when that is on; the trace is
// finished (timeline logged and written) on return.
capture::CompiledGraph compile_fx(std::shared_ptr<const Graph> graph, const CompileOptions& options,
                                  debug::CompileTrace& trace);
// The same, for a graph compiled outside coil::compile (tests, tools): `log_prefix` names it in
// logs and names its debug folder.
capture::CompiledGraph compile_fx(std::shared_ptr<const Graph> graph, const CompileOptions& options,
                                  const std::string& log_prefix);

// The device a graph's tensors live on, whose backend compiles it: its inputs', or its first
// result's for a graph without any (a factory's).
Device device_of(const Graph& g);

// A training step (AOTAutograd): `inputs` are the real inputs of this first call (their
// requires_grad decides which gradients the backward returns); the first `num_results` outputs
// of `graph` are the function's results, the rest in-place updates of inputs. The pre-grad
// passes run on the captured graph, then the joint forward+backward graph is built,
// decomposed and cleaned by the joint-graph passes, then partitioned; each half goes on
// through the post-grad passes to its own generated code.
capture::CompiledGraph compile_fx_training(std::shared_ptr<const Graph> graph,
                                           const CompileOptions& options,
                                           debug::CompileTrace& trace,
                                           const std::vector<Tensor>& inputs, size_t num_results);

}  // namespace coil
