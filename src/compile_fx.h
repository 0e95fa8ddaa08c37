// The backend pipeline: what happens to a captured graph, stage by stage (the analog of
// TorchInductor's compile_fx). One function lists every stage in order.
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

}  // namespace coil
