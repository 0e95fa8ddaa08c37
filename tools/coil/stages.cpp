#include "stages.h"

#include "decomp/decompose.h"
#include "jit/cpp_compiler.h"
#include "lower/lower_graph.h"
#include "passes/pass.h"
#include "schedule/scheduler.h"

namespace coil::tool {

void run_graph_stages(Graph& g, const std::string& log_prefix) {
  run_pass_group(g, "pre_grad", pre_grad_passes(), log_prefix);
  decompose(g);
  run_pass_group(g, "post_grad", post_grad_passes(), log_prefix);
}

Scheduled lower_and_schedule(const Graph& g) {
  auto program = std::make_shared<const ir::Program>(lower::lower_graph(g));
  schedule::Schedule sched = schedule::schedule(*program);
  return Scheduled{std::move(program), std::move(sched)};
}

Generated generate_code(const Scheduled& s, const std::string& name) {
  Generated out;
  for (const schedule::Kernel& k : s.schedule.kernels)
    out.kernels.push_back(codegen::generate_kernel(k, *s.program));
  out.source = codegen::cpp_source(out.kernels);
  if (!out.kernels.empty()) out.library = jit::load_cpp(out.source, name);
  out.wrapper = std::make_shared<const codegen::Wrapper>(
      codegen::plan_wrapper(*s.program, s.schedule, out.kernels), codegen::ready(out.library));
  return out;
}

}  // namespace coil::tool
