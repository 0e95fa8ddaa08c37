#include "support/config.h"

#include <cstdlib>
#include <stdexcept>

namespace coil::config {

const std::vector<Variable>& variables() {
  static const std::vector<Variable> table = {
      {Var::Logs, "COIL_LOGS", Kind::Text, "",
       "comma-separated log artifacts (graph_code, fusion, output_code, all; help lists them)"},
      {Var::LogFile, "COIL_LOG_FILE", Kind::Text, "stderr", "a file the logs are appended to"},
      {Var::TraceFile, "COIL_TRACE_FILE", Kind::Text, "",
       "a Chrome trace (chrome://tracing, Perfetto) every compile's timeline is added to"},
      {Var::DebugDir, "COIL_DEBUG_DIR", Kind::Text, "coil_compile_debug",
       "where trace.enabled writes its debug folders"},
      {Var::CompileDebug, "COIL_COMPILE_DEBUG", Kind::Flag, "off",
       "a debug folder with graph diagrams for every compile, as trace.graph_diagram"},
      {Var::CacheDir, "COIL_CACHE_DIR", Kind::Text, "$XDG_CACHE_HOME/coil or ~/.cache/coil",
       "the disk cache of compiled code and compiled graphs"},
      {Var::CacheMaxBytes, "COIL_CACHE_MAX_BYTES", Kind::Number, "2147483648",
       "the size `coil cache prune` and the cache's own pruning keep it under (0: no limit)"},
      {Var::SeedDir, "COIL_SEED_DIR", Kind::Text, "coil-kernels/ beside libcoil",
       "the seed cache: the GPU kernels coil ships compiled (set and empty: none)"},
      {Var::GraphCache, "COIL_GRAPH_CACHE", Kind::Flag, "on",
       "the compiled-graph cache (off: every graph goes through the pipeline again)"},
      {Var::CompileThreads, "COIL_COMPILE_THREADS", Kind::Number, "the cores",
       "compiler processes a large generated source is split among"},
      {Var::Disable, "COIL_DISABLE", Kind::Flag, "off",
       "coil::compile runs every function eagerly, as TORCHDYNAMO_DISABLE"},
      {Var::SuppressErrors, "COIL_SUPPRESS_ERRORS", Kind::Flag, "off",
       "a compile that fails runs its graph eagerly, with a warning, where "
       "CompileOptions::suppress_errors is unset"},
      {Var::Cxx, "COIL_CXX", Kind::Text, "g++, else c++",
       "the C++ compiler of generated CPU kernels (a path or a program on PATH)"},
      {Var::CxxFlags, "COIL_CXXFLAGS", Kind::Text, "", "flags added to its command line"},
      {Var::MatmulLibrary, "COIL_MATMUL_LIBRARY", Kind::Text, "onednn",
       "the library of single float32 CPU products: openblas or onednn"},
      {Var::CudaArch, "COIL_CUDA_ARCH", Kind::Text, "the GPU's, or sm_90 without one",
       "the architecture NVRTC compiles CUDA kernels for (sm_90)"},
      {Var::CudaSync, "COIL_CUDA_SYNC", Kind::Flag, "off",
       "wait for and check every GPU launch, as CUDA_LAUNCH_BLOCKING=1"},
      {Var::CudaNoCache, "COIL_CUDA_NO_CACHE", Kind::Flag, "off",
       "cudaMalloc and cudaFree for every GPU tensor, no caching allocator (for "
       "compute-sanitizer)"},
      {Var::CudaPdl, "COIL_CUDA_PDL", Kind::Flag, "on",
       "programmatic dependent launch on sm_90 and later"},
      {Var::KernelLaunch, "COIL_KERNEL_LAUNCH", Kind::Number, "",
       "max-autotune runs candidate launch N of every tuned kernel, untimed (for checking)"},
  };
  return table;
}

const Variable& variable(Var v) {
  const Variable& entry = variables().at(static_cast<size_t>(v));
  if (entry.var != v) throw std::logic_error("config: the table is out of Var's order");
  return entry;
}

std::optional<std::string> value(Var v) {
  const char* text = std::getenv(variable(v).name);
  if (!text) return std::nullopt;
  return std::string(text);
}

std::optional<std::string> text(Var v) {
  std::optional<std::string> set = value(v);
  if (set && set->empty()) return std::nullopt;
  return set;
}

bool flag(Var v) {
  const std::optional<std::string> value = text(v);
  if (!value) return std::string(variable(v).fallback) == "on";
  return *value != "0" && *value != "false" && *value != "off";
}

}  // namespace coil::config
