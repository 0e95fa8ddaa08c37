// coil codegen: the source of a graph's kernels (C++, or CUDA for a graph on a GPU) and the
// wrapper that calls them (the output_code log).
#include <algorithm>
#include <iostream>

#include "commands.h"
#include "graph_file.h"
#include "stages.h"
#include "text.h"

namespace coil::tool {

namespace {

int run_codegen(const Args& args) {
  std::string name = graph_name(args.file);
  Graph g = load_graph(args.file);
  Pipeline pipeline(name, g);
  pipeline.graph_stages(g);
  Pipeline::Scheduled s = pipeline.lower_and_schedule(g);
  Pipeline::Generated code = pipeline.generate_code(g, s);
  if (args.has("--source")) {  // exactly what the JIT compiled
    std::cout << code.source;
    return 0;
  }
  std::string_view prelude = pipeline.backend().prelude();
  const bool cuda = pipeline.backend().device() == DeviceType::CUDA;
  std::cout << (cuda ? "== CUDA source (src/backends/cuda/): "
                     : "== C++ source (src/backends/cpu/): ")
            << plural(static_cast<int64_t>(code.kernels.size()), "kernel") << " after the "
            << std::count(prelude.begin(), prelude.end(), '\n')
            << "-line prelude every source starts with (--source shows it)\n";
  for (const codegen::KernelSource& k : code.kernels) {
    std::cout << "// " << k.name;
    if (!cuda)  // (a CUDA kernel's form shows in its code: its launch bounds, its vector loads)
      std::cout << ": " << (k.vectorized ? "vectorized" : "scalar") << ", "
                << (k.parallel ? "OpenMP parallel" : "single-threaded");
    std::cout << "\n" << k.code << "\n";
  }
  std::cout << "== wrapper (src/codegen/wrapper.cpp): what a call of the compiled graph runs\n"
            << code.wrapper;
  return 0;
}

}  // namespace

Command codegen_command() {
  return {
      "codegen",
      "generate the source of a graph's kernels and the wrapper that calls them",
      "coil codegen FILE [--source]",
      "Runs the pipeline up to code generation and prints each kernel's function (the\n"
      "prelude of types and helpers every source starts with is left out) and the wrapper's\n"
      "plan: the buffers it allocates or reuses, the kernels and extern calls in order, what\n"
      "it frees and returns. Kernels are C++ for a graph on the CPU and CUDA C++ for one on\n"
      "cuda:N (also where there is no GPU: NVRTC compiles it, nothing runs). The source is\n"
      "compiled too (or found in the code cache at $COIL_CACHE_DIR).",
      {{"--source", nullptr, "print the whole compile unit, prelude included, and nothing else"}},
      run_codegen};
}

}  // namespace coil::tool
