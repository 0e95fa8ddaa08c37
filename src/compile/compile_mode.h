// CompileOptions::mode, torch.compile's modes, parsed once: what a mode asks of the pipeline is
// a question to the enum, not a comparison of its name in each place that needs it.
#pragma once

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

}  // namespace coil
