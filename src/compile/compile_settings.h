// CompileOptions parsed once: torch.compile's mode as an enum, asked what it wants of the
// pipeline, and the free-form options={...} as typed fields, instead of a comparison of a name
// or a lookup of a string in each place that needs one.
#pragma once

#include <coil/compile.h>

#include <string>

namespace coil {

enum class CompileMode { Default, ReduceOverhead, MaxAutotune, MaxAutotuneNoCudagraphs };

// The mode named `name` ("default", "reduce-overhead", "max-autotune",
// "max-autotune-no-cudagraphs"); a coil::Error naming them otherwise.
CompileMode compile_mode(const std::string& name);

// Whether compiled graphs are recorded as CUDA graphs and replayed (reduce-overhead,
// max-autotune).
bool records_cuda_graphs(CompileMode mode);
// Whether library calls and generated kernels time their candidates (the max-autotune pair).
bool autotunes(CompileMode mode);

// CompileOptions::options, each known name a field with its default (include/coil/compile.h
// says what each does). The debug folder's two (trace.*) are read by debug::debug_settings.
struct CompileFlags {
  bool trace_enabled = false;
  bool trace_graph_diagram = false;
  bool async_compile = true;
  bool freezing = false;
};
// A coil::Error for an unknown name (naming the known ones) or a value that is not a bool.
CompileFlags compile_flags(const CompileOptions& options);

}  // namespace coil
