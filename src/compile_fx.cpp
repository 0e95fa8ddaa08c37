#include "compile_fx.h"

#include <future>
#include <sstream>

#include "capture/counters.h"
#include "codegen/cpp_kernel.h"
#include "codegen/cpp_prelude.h"
#include "codegen/wrapper.h"
#include "debug/log.h"
#include "decomp/decompose.h"
#include "graph/interpreter.h"
#include "graph/printer.h"
#include "jit/cpp_compiler.h"
#include "jit/graph_cache.h"
#include "lower/lower_graph.h"
#include "passes/pass.h"
#include "schedule/placement.h"
#include "schedule/scheduler.h"

namespace coil {

namespace {

capture::CompiledGraph interpreted(std::shared_ptr<const Graph> g) {
  capture::CompiledGraph cg;
  cg.graph = g;
  cg.run = [g](const std::vector<Tensor>& inputs) { return interpret(*g, inputs); };
  return cg;
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
      out += "\n  " + st.buffer + " = extern " + op_name(c.op) + " (" + c.reason + ")";
    }
  }
  return out;
}

// The generated source as compiled, then the wrapper's plan (which kernel or extern call runs
// when, which buffer reuses which), as comments: output_code.cpp still compiles.
std::string output_code(const std::string& source, const codegen::Wrapper& wrapper) {
  std::string out = source + "\n// The wrapper, which runs the kernels and extern calls:\n";
  std::istringstream text(wrapper.text());
  for (std::string line; std::getline(text, line);) out += "// " + line + "\n";
  return out;
}

// The JIT stage: a "load" span (hashing, cache lookup, dlopen) with the compiler run inside
// it as "cc" when the code was not cached.
std::shared_ptr<const jit::Library> load(const std::string& source, const std::string& name,
                                         debug::Timeline& t) {
  auto span = t.span("jit", "load");
  jit::LoadInfo info;
  std::shared_ptr<const jit::Library> library = jit::load_cpp(source, name, &info);
  span.arg("cache", jit::to_string(info.outcome));
  span.arg("key", info.key);
  span.arg("library", library->path());
  auto dur = [](double ms) {
    return std::chrono::duration_cast<debug::Clock::duration>(
        std::chrono::duration<double, std::milli>(ms));
  };
  if (info.outcome == jit::CacheOutcome::compiled)
    t.add("cc", "cc", info.compile_start, dur(info.compile_ms));
  if (info.outcome != jit::CacheOutcome::memory_hit)
    t.add("dlopen", "", info.load_start, dur(info.load_ms));
  return library;
}

// The library of `source`, compiled on a thread of its own so that the first call's extern
// calls before its first kernel (a matrix product, oneDNN making its primitive) run while the
// compiler does, as do the forward's calls while the backward compiles. Loaded now instead
// (the cc and dlopen spans in the timeline) with the option async_compile false, or when anyone
// watches this compile's JIT stage: the timeline, cache and output_code logs, the debug
// folder, COIL_TRACE_FILE.
codegen::LibraryFuture library_of(const std::string& source, const CompileOptions& options,
                                  debug::CompileTrace& trace) {
  auto async = options.options.find("async_compile");
  const bool now = (async != options.options.end() && !std::get<bool>(async->second)) ||
                   trace.timeline_watched() || debug::log_enabled("cache") ||
                   debug::log_enabled("output_code");
  const std::string& name = options.name;
  if (!now)
    return std::async(std::launch::async, [source, name] { return jit::load_cpp(source, name); })
        .share();
  return codegen::ready(load(source, name, trace.timeline()));
}

// Does a log or the debug folder want to see the stages after capture? Then they run, and the
// graph cache, which would skip them, is not consulted.
bool stages_watched(const debug::CompileTrace& trace) {
  static const char* const kStageLogs[] = {"passes",           "passes_graphs", "decompositions",
                                           "post_grad_graphs", "ir_pre_fusion", "fusion",
                                           "schedule",         "ir_post_fusion"};
  if (!trace.dir().empty()) return true;
  for (const char* log : kStageLogs)
    if (debug::log_enabled(log)) return true;
  return false;
}

// The callable of a compiled graph, whether just compiled or read from the graph cache; logs
// the output code and ends the compile's trace.
capture::CompiledGraph finish(jit::CachedGraph compiled, const codegen::LibraryFuture& library,
                              std::shared_ptr<const Graph> g, debug::CompileTrace& trace,
                              const std::string& how) {
  auto wrapper = std::make_shared<const codegen::Wrapper>(std::move(compiled.plan), library);
  if (debug::log_enabled("output_code")) {
    // The kernels and the wrapper; the prelude every source starts with is in the file. (The
    // log makes library_of load the library before this.)
    std::string code =
        compiled.source.substr(std::min(compiled.source.size(), codegen::cpp_prelude().size()));
    std::string path = library.valid() ? library.get()->path() : "";
    if (path.size() > 3) path = path.substr(0, path.size() - 3) + ".cpp";
    debug::log(
        "output_code", trace.log_prefix(),
        (path.empty() ? "" : "// " + path + " (after its prelude):\n") + code + wrapper->text());
  }
  trace.write("output_code.cpp", [&] { return output_code(compiled.source, *wrapper); });
  size_t kernels = wrapper->plan().kernel_count();
  size_t externs = wrapper->plan().steps.size() - kernels;
  capture::bump(capture::Counter::generated_kernels, static_cast<int64_t>(kernels));
  capture::bump(capture::Counter::extern_calls, static_cast<int64_t>(externs));
  trace.finish(std::to_string(kernels) + " kernel" + (kernels == 1 ? "" : "s") + ", " +
               std::to_string(externs) + " extern call" + (externs == 1 ? "" : "s") + how);
  capture::CompiledGraph cg;
  cg.graph = std::move(g);
  cg.run = [wrapper](const std::vector<Tensor>& inputs) { return wrapper->run(inputs); };
  return cg;
}

}  // namespace

// The whole backend, in order. "eager" stops after capture, "aot_eager" after the graph
// stages (its graph runs on the eager kernels), "inductor" goes on to generated code. Each
// stage is a span of the compile timeline and, with the debug folder on, leaves a file.
capture::CompiledGraph compile_fx(std::shared_ptr<const Graph> captured,
                                  const CompileOptions& options, debug::CompileTrace& trace) {
  capture::bump(capture::Counter::compiles);
  const std::string& log_prefix = trace.log_prefix();
  debug::Timeline& t = trace.timeline();
  verify(*captured);
  debug::log("graph_code", log_prefix, "captured graph:\n" + print_graph(*captured));
  trace.write("graph_code.txt", [&] { return print_graph(*captured); });
  if (options.backend == "eager") {
    trace.finish("eager: the captured graph runs on the interpreter");
    return interpreted(captured);
  }

  // A graph compiled before, in this process or an earlier one, skips every stage below
  // unless a log or the debug folder is watching them.
  std::string cache_key;
  if (options.backend == "inductor" && !stages_watched(trace))
    cache_key = jit::graph_cache_key(*captured, options);
  if (!cache_key.empty()) {
    std::optional<jit::CachedGraph> hit = t.stage("graph cache lookup", "cache", [&] {
      return jit::load_cached_graph(cache_key, *captured);
    });
    capture::bump(hit ? capture::Counter::graph_cache_hits : capture::Counter::graph_cache_misses);
    if (hit) {
      codegen::LibraryFuture library;
      if (!hit->source.empty()) library = library_of(hit->source, options, trace);
      return finish(std::move(*hit), library, captured, trace, ", from the graph cache");
    }
  }

  auto g = std::make_shared<Graph>(captured->clone());
  t.stage("pre_grad passes", "passes",
          [&] { return run_pass_group(*g, "pre_grad", pre_grad_passes(), log_prefix, &t); });
  trace.write("pre_grad.txt", [&] { return print_graph(*g); });
  // A training graph arrives here already split in two: autograd/aot_autograd.cpp builds the
  // joint graph, partitions it, and compiles each half through this function.
  t.stage("decompositions", "decompose", [&] { return decompose(*g); });
  debug::log("decompositions", log_prefix, "after decompositions:\n" + print_graph(*g));
  trace.write("decomposed.txt", [&] { return print_graph(*g); });
  t.stage("post_grad passes", "passes",
          [&] { return run_pass_group(*g, "post_grad", post_grad_passes(), log_prefix, &t); });
  debug::log("post_grad_graphs", log_prefix, "after post-grad passes:\n" + print_graph(*g));
  trace.write("post_grad.txt", [&] { return print_graph(*g); });
  if (options.backend == "aot_eager") {
    trace.finish("aot_eager: the graph runs on eager kernels");
    return interpreted(g);
  }

  ir::Program program = t.stage("lowering", "lower", [&] { return lower::lower_graph(*g); });
  debug::log("ir_pre_fusion", log_prefix, "loop IR:\n" + ir::to_string(program));
  trace.write("ir_pre_fusion.txt", [&] { return ir::to_string(program); });
  schedule::Schedule sched =
      t.stage("scheduling", "schedule", [&] { return schedule::schedule(program); });
  for (const std::string& d : sched.decisions) debug::log("fusion", log_prefix, d);
  debug::log("schedule", log_prefix, steps_text(sched, program));
  trace.write("fusion.txt", [&] { return lines(sched.decisions); });
  std::vector<codegen::KernelSource> kernels = t.stage("codegen", "codegen", [&] {
    std::vector<codegen::KernelSource> ks;
    for (const schedule::Kernel& k : sched.kernels) {
      auto span = t.span(k.name);
      ks.push_back(codegen::generate_kernel(k, program));
    }
    return ks;
  });
  if (debug::log_enabled("ir_post_fusion"))
    for (const schedule::Kernel& k : sched.kernels)
      debug::log("ir_post_fusion", log_prefix, schedule::to_string(k));
  trace.write("ir_post_fusion.txt", [&] { return kernels_text(sched); });
  trace.write_diagram([&] { return schedule::kernel_diagram(*g, program, sched); });
  jit::CachedGraph compiled;
  if (!kernels.empty()) compiled.source = codegen::cpp_source(kernels);
  // Written before the compiler runs, so a compile error has the source at hand; completed
  // with the wrapper's plan below.
  trace.write("output_code.cpp", [&] { return compiled.source; });
  codegen::LibraryFuture library;
  if (!kernels.empty()) library = library_of(compiled.source, options, trace);
  compiled.plan =
      t.stage("wrapper", "wrapper", [&] { return codegen::plan_wrapper(program, sched, kernels); });
  if (!cache_key.empty())
    t.stage("graph cache store", "cache",
            [&] { return jit::store_cached_graph(cache_key, *captured, compiled); });
  return finish(std::move(compiled), library, g, trace, "");
}

capture::CompiledGraph compile_fx(std::shared_ptr<const Graph> graph, const CompileOptions& options,
                                  const std::string& log_prefix) {
  debug::CompileTrace trace(log_prefix, log_prefix, options, {});
  return compile_fx(std::move(graph), options, trace);
}

}  // namespace coil
