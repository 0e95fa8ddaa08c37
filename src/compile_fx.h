// The backend pipeline: what happens to a captured graph, stage by stage (the analog of
// TorchInductor's compile_fx). One function lists every stage in order.
#pragma once

#include <coil/compile.h>

#include "capture/tracer.h"

namespace coil {

// Compiles a captured graph with the backend named in `options` and returns the callable
// that runs it on real inputs (one tensor per placeholder, in order).
capture::CompiledGraph compile_fx(std::shared_ptr<const Graph> graph, const CompileOptions& options,
                                  const std::string& log_prefix);

}  // namespace coil
