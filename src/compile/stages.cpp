#include "compile/stages.h"

#include "capture/counters.h"
#include "codegen/shared_kernels.h"
#include "compile/kernel_diagram.h"
#include "debug/log.h"
#include "decomp/decompose.h"
#include "graph/printer.h"
#include "lower/lower_graph.h"
#include "passes/pass.h"
#include "schedule/scheduler.h"

namespace coil::stages {

namespace {

void pass_group(Graph& g, const char* group, const std::vector<Pass>& passes,
                debug::CompileTrace& trace) {
  debug::Timeline& t = trace.timeline();
  t.stage(std::string(group) + " passes", "passes",
          [&] { return run_pass_group(g, group, passes, trace.log_prefix(), &t); });
}

std::string lines(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += s + "\n";
  return out;
}

std::string kernels_text(const schedule::Schedule& sched) {
  std::string out;
  for (const schedule::Kernel& k : sched.kernels) out += schedule::to_string(k) + "\n";
  return out;
}

// The order the compiled graph runs its kernels and library calls in.
std::string steps_text(const schedule::Schedule& sched, const ir::Program& program) {
  std::string out = "run order:";
  for (const schedule::Step& st : sched.steps) {
    if (st.kernel >= 0) {
      const schedule::Kernel& k = sched.kernels[static_cast<size_t>(st.kernel)];
      out += "\n  " + k.name + " (" + std::to_string(k.nodes.size()) + " buffers)";
    } else {
      const ir::ExternCall& c = *program.buffer(st.buffer).call;
      out += "\n  " + st.buffer +
             (c.result > 0 ? " = result " + std::to_string(c.result) + " of " + c.first
                           : " = extern " + std::string(op_name(c.op)) + " (" + c.reason + ")");
    }
  }
  return out;
}

}  // namespace

void pre_grad(Graph& g, debug::CompileTrace& trace) {
  pass_group(g, "pre_grad", pre_grad_passes(), trace);
  trace.write("pre_grad.txt", [&] { return print_graph(g); });
}

void freezing(Graph& g, debug::CompileTrace& trace) {
  pass_group(g, "freezing", freezing_passes(), trace);
  trace.write("freezing.txt", [&] { return print_graph(g); });
}

void decompositions(Graph& g, debug::CompileTrace& trace) {
  trace.timeline().stage("decompositions", "decompose", [&] { return decompose(g); });
  debug::log("decompositions", trace.log_prefix(), "after decompositions:\n" + print_graph(g));
  trace.write("decomposed.txt", [&] { return print_graph(g); });
}

void joint_graph(Graph& g, debug::CompileTrace& trace) {
  pass_group(g, "joint_graph", joint_graph_passes(), trace);
  debug::log("aot_graphs", trace.log_prefix(), "joint graph after its passes:\n" + print_graph(g));
  trace.write("joint_graph_passes.txt", [&] { return print_graph(g); });
}

void post_grad(Graph& g, debug::CompileTrace& trace) {
  pass_group(g, "post_grad", post_grad_passes(), trace);
  debug::log("post_grad_graphs", trace.log_prefix(), "after post-grad passes:\n" + print_graph(g));
  trace.write("post_grad.txt", [&] { return print_graph(g); });
}

void graph_stages(Graph& g, debug::CompileTrace& trace) {
  pre_grad(g, trace);
  decompositions(g, trace);
  post_grad(g, trace);
}

aot::JointGraph autograd(const Graph& g, const std::vector<bool>& requires_grad, size_t num_results,
                         debug::CompileTrace& trace) {
  aot::JointGraph joint = trace.timeline().stage("joint graph", "autograd", [&] {
    return aot::build_joint_graph(g, requires_grad, num_results);
  });
  debug::log("aot_graphs", trace.log_prefix(), "joint graph:\n" + print_graph(*joint.graph));
  trace.write("joint_graph.txt", [&] { return print_graph(*joint.graph); });
  return joint;
}

aot::Partition partition(const aot::JointGraph& joint, debug::CompileTrace& trace) {
  aot::Partition part =
      trace.timeline().stage("partition", "autograd", [&] { return aot::partition(joint); });
  const std::string& prefix = trace.log_prefix();
  debug::log("partitioner", prefix, part.report());
  capture::bump(capture::Counter::saved_bytes, part.saved_bytes);
  capture::bump(capture::Counter::save_all_bytes, part.save_everything_bytes);
  debug::log("aot_graphs", prefix, "forward graph:\n" + print_graph(*part.forward));
  debug::log("aot_graphs", prefix, "backward graph:\n" + print_graph(*part.backward));
  trace.write("partition.txt", [&] { return part.report(); });
  return part;
}

ir::Program lowering(const Graph& g, const backends::DeviceBackend& backend,
                     debug::CompileTrace& trace) {
  ir::Program program = trace.timeline().stage("lowering", "lower", [&] {
    return lower::lower_graph(g, [&](const Node& n) { return backend.library_call(n); });
  });
  debug::log("ir_pre_fusion", trace.log_prefix(), "loop IR:\n" + ir::to_string(program));
  trace.write("ir_pre_fusion.txt", [&] { return ir::to_string(program); });
  return program;
}

schedule::Schedule scheduling(const ir::Program& program, debug::CompileTrace& trace) {
  schedule::Schedule sched =
      trace.timeline().stage("scheduling", "schedule", [&] { return schedule::schedule(program); });
  std::vector<std::string> decisions;
  for (const schedule::FusionDecision& d : sched.decisions) decisions.push_back(d.str());
  for (const std::string& d : decisions) debug::log("fusion", trace.log_prefix(), d);
  debug::log("schedule", trace.log_prefix(), steps_text(sched, program));
  trace.write("fusion.txt", [&] { return lines(decisions); });
  return sched;
}

std::vector<codegen::KernelSource> codegen(const Graph& g, const ir::Program& program,
                                           const schedule::Schedule& sched,
                                           const backends::DeviceBackend& backend,
                                           debug::CompileTrace& trace, bool autotune) {
  debug::Timeline& t = trace.timeline();
  std::vector<codegen::KernelSource> kernels = t.stage("codegen", "codegen", [&] {
    std::vector<codegen::KernelSource> ks;
    for (const schedule::Kernel& k : sched.kernels) {
      auto span = t.span(k.name);
      ks.push_back(backend.generate_kernel(k, program));
      if (autotune) ks.back().alternatives = backend.launch_alternatives(k, program);
    }
    return ks;
  });
  if (int shared = codegen::share_identical_kernels(kernels))
    debug::log("output_code", trace.log_prefix(),
               std::to_string(shared) + " of " + std::to_string(kernels.size()) +
                   " kernels run an identical earlier kernel's code");
  if (debug::log_enabled("ir_post_fusion"))
    for (const schedule::Kernel& k : sched.kernels)
      debug::log("ir_post_fusion", trace.log_prefix(), schedule::to_string(k));
  trace.write("ir_post_fusion.txt", [&] { return kernels_text(sched); });
  trace.write_diagram([&] { return kernel_diagram(g, program, sched); });
  return kernels;
}

codegen::WrapperPlan wrapper(const ir::Program& program, const schedule::Schedule& sched,
                             const std::vector<codegen::KernelSource>& kernels,
                             debug::CompileTrace& trace) {
  return trace.timeline().stage("wrapper", "wrapper",
                                [&] { return codegen::plan_wrapper(program, sched, kernels); });
}

}  // namespace coil::stages
