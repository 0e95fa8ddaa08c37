#include "compile_fx.h"

#include <chrono>
#include <cstdio>

#include "capture/counters.h"
#include "codegen/cpp_kernel.h"
#include "codegen/wrapper.h"
#include "debug/log.h"
#include "decomp/decompose.h"
#include "graph/interpreter.h"
#include "graph/printer.h"
#include "jit/cpp_compiler.h"
#include "lower/lower_graph.h"
#include "passes/pass.h"
#include "schedule/scheduler.h"

namespace coil {

namespace {

// Times each stage and writes the one-line summary of the `timeline` log.
class Timeline {
 public:
  explicit Timeline(std::string prefix) : prefix_(std::move(prefix)) {}
  template <typename F>
  decltype(auto) stage(const char* name, F&& f) {
    auto t0 = std::chrono::steady_clock::now();
    struct Record {
      Timeline* self;
      const char* name;
      std::chrono::steady_clock::time_point t0;
      ~Record() {
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                        .count();
        char buf[32];
        std::snprintf(buf, sizeof buf, " %.2f ms", ms);
        self->summary_ += std::string(self->summary_.empty() ? "" : ", ") + name + buf;
      }
    } record{this, name, t0};
    return f();
  }
  void finish(const std::string& what) { debug::log("timeline", prefix_, what + ": " + summary_); }

 private:
  std::string prefix_;
  std::string summary_;
};

capture::CompiledGraph interpreted(std::shared_ptr<const Graph> g) {
  capture::CompiledGraph cg;
  cg.graph = g;
  cg.run = [g](const std::vector<Tensor>& inputs) { return interpret(*g, inputs); };
  return cg;
}

}  // namespace

// The whole backend, in order. "eager" stops after capture, "aot_eager" after the graph
// stages (its graph runs on the eager kernels), "inductor" goes on to generated code.
capture::CompiledGraph compile_fx(std::shared_ptr<const Graph> captured,
                                  const CompileOptions& options, const std::string& log_prefix) {
  capture::bump(capture::Counter::compiles);
  Timeline t(log_prefix);
  verify(*captured);
  debug::log("graph_code", log_prefix, "captured graph:\n" + print_graph(*captured));
  if (options.backend == "eager") return interpreted(captured);

  auto g = std::make_shared<Graph>(captured->clone());
  t.stage("pre_grad passes",
          [&] { return run_pass_group(*g, "pre_grad", pre_grad_passes(), log_prefix); });
  // Autograd's joint graph and partitioner slot in here (training, its own issue).
  t.stage("decompositions", [&] { return decompose(*g); });
  debug::log("decompositions", log_prefix, "after decompositions:\n" + print_graph(*g));
  t.stage("post_grad passes",
          [&] { return run_pass_group(*g, "post_grad", post_grad_passes(), log_prefix); });
  if (options.backend == "aot_eager") {
    t.finish("compile " + options.name + " (aot_eager)");
    return interpreted(g);
  }

  auto program =
      std::make_shared<ir::Program>(t.stage("lowering", [&] { return lower::lower_graph(*g); }));
  debug::log("ir_pre_fusion", log_prefix, "loop IR:\n" + ir::to_string(*program));
  schedule::Schedule sched = t.stage("scheduling", [&] { return schedule::schedule(*program); });
  for (const std::string& d : sched.decisions) debug::log("fusion", log_prefix, d);
  std::vector<codegen::KernelSource> kernels = t.stage("codegen", [&] {
    std::vector<codegen::KernelSource> ks;
    for (const schedule::Kernel& k : sched.kernels)
      ks.push_back(codegen::generate_kernel(k, *program));
    return ks;
  });
  if (debug::log_enabled("ir_post_fusion"))
    for (const schedule::Kernel& k : sched.kernels)
      debug::log("ir_post_fusion", log_prefix, schedule::to_string(k));
  std::string source = codegen::cpp_source(kernels);
  std::shared_ptr<const jit::Library> library;
  if (!kernels.empty())
    library = t.stage("jit", [&] { return jit::load_cpp(source, options.name); });
  auto wrapper = std::make_shared<codegen::Wrapper>(*program, sched, kernels, library);
  if (debug::log_enabled("output_code")) {
    // The kernels and the wrapper; the prelude every source starts with is in the file.
    std::string code;
    for (const codegen::KernelSource& k : kernels) code += k.code + "\n";
    std::string path = library ? library->path() : "";
    if (path.size() > 3) path = path.substr(0, path.size() - 3) + ".cpp";
    debug::log(
        "output_code", log_prefix,
        (path.empty() ? "" : "// " + path + " (after its prelude):\n") + code + wrapper->text());
  }
  capture::bump(capture::Counter::generated_kernels, static_cast<int64_t>(kernels.size()));
  capture::bump(capture::Counter::extern_calls,
                static_cast<int64_t>(sched.steps.size() - sched.kernels.size()));
  t.finish("compile " + options.name + " (" + std::to_string(kernels.size()) + " kernels)");

  capture::CompiledGraph cg;
  cg.graph = g;
  // The wrapper refers into the program's buffers: the closure keeps both alive.
  cg.run = [program, wrapper](const std::vector<Tensor>& inputs) { return wrapper->run(inputs); };
  return cg;
}

}  // namespace coil
