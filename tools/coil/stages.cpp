#include "stages.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include <coil/cuda.h>
#include <coil/error.h>

#include "compile/compile_fx.h"
#include "compile/stages.h"

namespace coil::tool {

namespace {

// The backend of the graph's device: on a machine without a GPU, CUDA's compile-only one.
const backends::DeviceBackend& backend_of(const Graph& g) {
  const Device device = device_of(g);
  if (!device.is_cuda() || cuda::is_available()) return backends::backend_for(device);
  const backends::DeviceBackend* compile_only = backends::cuda_backend(-1);
  COIL_CHECK(compile_only, "the graph is on ", device.str(),
             ": coil was built without CUDA (no CUDA toolkit was found when it was configured); "
             "rebuild it where one is installed, or put the graph on the CPU");
  return *compile_only;
}

// Compiles `source` without loading it (CUDA code where there is no GPU): a coil::Error with the
// compiler's log when it fails.
void compile_only(const backends::DeviceBackend& backend, const std::string& source) {
  std::string dir = (std::filesystem::temp_directory_path() / "coil-tool-XXXXXX").string();
  COIL_CHECK(mkdtemp(dir.data()), "coil codegen: cannot make a temporary folder in ", dir);
  std::unique_ptr<jit::Compiler> compiler = backend.compiler();
  const std::string path = dir + "/kernels" + compiler->source_extension();
  std::ofstream(path) << source;
  jit::Compiler::Outcome out =
      compiler->compile(source, path, dir + "/kernels" + compiler->binary_extension());
  std::filesystem::remove_all(dir);
  COIL_CHECK(out.ok, compiler->name(), " failed on the generated source (", out.failure, "):\n",
             out.log);
}

}  // namespace

Pipeline::Pipeline(const std::string& name, const Graph& g)
    : name_(name), trace_("[" + name + "]", name, CompileOptions{}, {}), backend_(backend_of(g)) {}

void Pipeline::graph_stages(Graph& g) { stages::graph_stages(g, trace_); }

Pipeline::Scheduled Pipeline::lower_and_schedule(const Graph& g) {
  auto program = std::make_shared<const ir::Program>(stages::lowering(g, backend_, trace_));
  schedule::Schedule sched = stages::scheduling(*program, trace_);
  return Scheduled{std::move(program), std::move(sched)};
}

Pipeline::Generated Pipeline::generate_code(const Graph& g, const Scheduled& s) {
  Generated out;
  out.kernels = stages::codegen(g, *s.program, s.schedule, backend_, trace_);
  out.source = backend_.module_source(out.kernels);
  if (!out.kernels.empty()) {
    if (backend_.device() == DeviceType::CUDA && !cuda::is_available())
      compile_only(backend_, out.source);
    else
      backend_.load(out.source, name_);
  }
  out.wrapper =
      codegen::render_wrapper(stages::wrapper(*s.program, s.schedule, out.kernels, trace_));
  return out;
}

}  // namespace coil::tool
