#include "stages.h"

#include "compile/stages.h"

namespace coil::tool {

Pipeline::Pipeline(const std::string& name)
    : name_(name),
      trace_("[" + name + "]", name, CompileOptions{}, {}),
      backend_(backends::backend_for(kCPU)) {}

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
  std::shared_ptr<const jit::Module> module;
  if (!out.kernels.empty()) module = backend_.load(out.source, name_);
  const backends::DeviceBackend& backend = backend_;
  out.wrapper = std::make_shared<const codegen::Wrapper>(
      stages::wrapper(*s.program, s.schedule, out.kernels, trace_), codegen::ready(module),
      [&backend](const jit::Module& m, const codegen::WrapperPlan::Step& step) {
        return backend.bind(m, step);
      });
  return out;
}

}  // namespace coil::tool
