#include "compile/compile_fx.h"

#include <future>
#include <sstream>

#include "aot/aot_autograd.h"
#include "backends/backend.h"
#include "capture/counters.h"
#include "codegen/wrapper.h"
#include "compile/compile_backends.h"
#include "compile/compile_settings.h"
#include "compile/graph_cache.h"
#include "compile/stages.h"
#include "debug/log.h"
#include "graph/interpreter.h"
#include "graph/printer.h"
#include "runtime/autotune.h"

namespace coil {

namespace {

using Depth = CompileBackend::Depth;

capture::CompiledGraph interpreted(std::shared_ptr<const Graph> g) {
  capture::CompiledGraph cg;
  cg.graph = g;
  cg.run = [g](const std::vector<Tensor>& inputs) { return interpret(*g, inputs); };
  return cg;
}

// The generated source as compiled, then the wrapper's plan (which kernel or extern call runs
// when, which buffer reuses which), as comments: output_code.cpp still compiles.
std::string output_code(const std::string& source, const codegen::Wrapper& wrapper) {
  std::string out = source + "\n// The wrapper, which runs the kernels and extern calls:\n";
  std::istringstream text(wrapper.text());
  for (std::string line; std::getline(text, line);) out += "// " + line + "\n";
  return out;
}

// The JIT stage: a "load" span (hashing, cache lookup, loading) with the compiler run inside
// it as "cc" when the code was not cached.
std::shared_ptr<const jit::Module> load(const backends::DeviceBackend& backend,
                                        const std::string& source, const std::string& name,
                                        debug::Timeline& t) {
  auto span = t.span("jit", "load");
  jit::LoadInfo info;
  std::shared_ptr<const jit::Module> module = backend.load(source, name, &info);
  span.arg("cache", jit::to_string(info.outcome));
  span.arg("key", info.key);
  span.arg("module", module->path());
  auto dur = [](double ms) {
    return std::chrono::duration_cast<debug::Clock::duration>(
        std::chrono::duration<double, std::milli>(ms));
  };
  if (info.outcome == jit::CacheOutcome::compiled)
    t.add("cc", "cc", info.compile_start, dur(info.compile_ms));
  if (info.outcome != jit::CacheOutcome::memory_hit)
    t.add(info.loader, "", info.load_start, dur(info.load_ms));
  return module;
}

// The module of `source`, compiled on a thread of its own so that the first call's extern
// calls before its first kernel (a matrix product, oneDNN making its primitive) run while the
// compiler does, as do the forward's calls while the backward compiles. Loaded now instead
// (the cc and load spans in the timeline) with the option async_compile false, or when anyone
// watches this compile's JIT stage: the timeline, cache and output_code logs, the debug
// folder, COIL_TRACE_FILE.
codegen::ModuleFuture module_of(const backends::DeviceBackend& backend, const std::string& source,
                                const CompileOptions& options, debug::CompileTrace& trace) {
  const bool now = !compile_flags(options).async_compile || trace.timeline_watched() ||
                   debug::log_enabled("cache") || debug::log_enabled("output_code");
  const std::string& name = options.name;
  if (!now)
    return std::async(std::launch::async,
                      [&backend, source, name] { return backend.load(source, name); })
        .share();
  return codegen::ready(load(backend, source, name, trace.timeline()));
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

bool max_autotune(const CompileOptions& options) { return autotunes(compile_mode(options.mode)); }

// The callable of a compiled graph, whether just compiled or read from the graph cache; logs
// the output code and ends the compile's trace.
capture::CompiledGraph finish(CachedGraph compiled, const backends::DeviceBackend& backend,
                              const codegen::ModuleFuture& module, std::shared_ptr<const Graph> g,
                              debug::CompileTrace& trace, const std::string& how, bool autotune) {
  auto wrapper = std::make_shared<const codegen::Wrapper>(
      std::move(compiled.plan), module,
      [&backend](const jit::Module& m, const codegen::WrapperPlan::Step& step) {
        return backend.bind(m, step);
      });
  if (debug::log_enabled("output_code")) {
    // The kernels and the wrapper; the prelude every source starts with is in the file. (The
    // log makes module_of load the module before this.)
    std::string code =
        compiled.source.substr(std::min(compiled.source.size(), backend.prelude().size()));
    std::string path = module.valid() ? module.get()->path() : "";
    if (const size_t dot = path.rfind('.'); dot != std::string::npos)
      path = path.substr(0, dot) + backend.source_extension();
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
  // mode="max-autotune": the library calls of every run time their candidates (once per
  // problem; runtime/autotune.h).
  cg.run = [wrapper, autotune](const std::vector<Tensor>& inputs) {
    AutotuneScope scope(autotune);
    return wrapper->run(inputs);
  };
  cg.run_into = [wrapper, autotune](const std::vector<Tensor>& inputs, const Tensor& into) {
    AutotuneScope scope(autotune);
    return wrapper->run(inputs, &into);
  };
  return cg;
}

// The compiled-graph cache's entry for `graph`, when the backend generates code, nobody watches
// the stages it would skip, and a graph compiled before (in this process or an earlier one)
// left one. `key` is set to the key to store under, or "" when the cache is not used.
std::optional<capture::CompiledGraph> cached(std::shared_ptr<const Graph> graph,
                                             const CompileOptions& options,
                                             debug::CompileTrace& trace, std::string& key) {
  key.clear();
  if (compile_backend(options.backend).depth != Depth::code || stages_watched(trace))
    return std::nullopt;
  key = graph_cache_key(*graph, options);
  if (key.empty()) return std::nullopt;
  std::optional<CachedGraph> hit = trace.timeline().stage(
      "graph cache lookup", "cache", [&] { return load_cached_graph(key, *graph); });
  capture::bump(hit ? capture::Counter::graph_cache_hits : capture::Counter::graph_cache_misses);
  if (!hit) return std::nullopt;
  const backends::DeviceBackend& backend = backends::backend_for(device_of(*graph));
  codegen::ModuleFuture module;
  if (!hit->source.empty()) module = module_of(backend, hit->source, options, trace);
  return finish(std::move(*hit), backend, module, graph, trace, ", from the graph cache",
                max_autotune(options));
}

// A graph's compile once its graph stages are done (Inductor's compile_fx_inner): lowering,
// scheduling, code generation, the JIT and the wrapper; stored in the graph cache under
// `cache_key` (the graph it was compiled from) unless that is empty. aot_eager stops before.
capture::CompiledGraph compile_inner(std::shared_ptr<Graph> g, const Graph& keyed,
                                     const std::string& cache_key, const CompileOptions& options,
                                     debug::CompileTrace& trace) {
  if (compile_backend(options.backend).depth == Depth::graph) {
    trace.finish("aot_eager: the graph runs on eager kernels");
    return interpreted(g);
  }
  const backends::DeviceBackend& backend = backends::backend_for(device_of(*g));
  ir::Program program = stages::lowering(*g, backend, trace);
  schedule::Schedule sched = stages::scheduling(program, trace);
  std::vector<codegen::KernelSource> kernels =
      stages::codegen(*g, program, sched, backend, trace, max_autotune(options));
  CachedGraph compiled;
  if (!kernels.empty()) compiled.source = backend.module_source(kernels);
  // Written before the compiler runs, so a compile error has the source at hand; completed
  // with the wrapper's plan in finish().
  trace.write("output_code.cpp", [&] { return compiled.source; });
  codegen::ModuleFuture module;
  if (!kernels.empty()) module = module_of(backend, compiled.source, options, trace);
  compiled.plan = stages::wrapper(program, sched, kernels, trace);
  if (const std::shared_ptr<ShapeEnv>& env = g->shape_env()) compiled.guards = env->guards();
  if (!cache_key.empty())
    trace.timeline().stage("graph cache store", "cache",
                           [&] { return store_cached_graph(cache_key, keyed, compiled); });
  return finish(std::move(compiled), backend, module, g, trace, "", max_autotune(options));
}

// Logs the captured graph; true when the backend runs it as it is ("eager").
bool captured(const Graph& graph, const CompileOptions& options, debug::CompileTrace& trace) {
  capture::bump(capture::Counter::compiles);
  verify(graph);
  debug::log("graph_code", trace.log_prefix(), "captured graph:\n" + print_graph(graph));
  trace.write("graph_code.txt", [&] { return print_graph(graph); });
  return compile_backend(options.backend).depth == Depth::capture;
}

}  // namespace

Device device_of(const Graph& g) {
  for (const Node* n : g.nodes())
    if (n->kind() == NodeKind::Placeholder || n->kind() == NodeKind::Parameter)
      return n->tensor_meta().device;
  for (const Node* n : g.nodes())
    if (n->kind() == NodeKind::Call && !n->meta().empty()) return n->meta()[0].device;
  return kCPU;
}

// The whole backend for inference, in order: pre-grad passes, decompositions, post-grad
// passes, lowering, scheduling, code generation, the JIT and the wrapper. "eager" stops after
// capture, "aot_eager" after the graph stages (its graph runs on the eager kernels).
capture::CompiledGraph compile_fx(std::shared_ptr<const Graph> graph, const CompileOptions& options,
                                  debug::CompileTrace& trace) {
  if (captured(*graph, options, trace)) {
    trace.finish("eager: the captured graph runs on the interpreter");
    return interpreted(graph);
  }
  // Frozen graphs hold values computed from the parameters at compile time, which the graph
  // cache's key does not cover: they are compiled in every process.
  const bool freezing = compile_flags(options).freezing;
  std::string key;
  if (!freezing)
    if (std::optional<capture::CompiledGraph> hit = cached(graph, options, trace, key)) return *hit;
  auto g = std::make_shared<Graph>(graph->clone());
  if (freezing) stages::freezing(*g, trace);
  stages::graph_stages(*g, trace);
  return compile_inner(g, *graph, key, options, trace);
}

// The whole backend for a training step (AOTAutograd inside compile_fx, as in Inductor).
capture::CompiledGraph compile_fx_training(std::shared_ptr<const Graph> graph,
                                           const CompileOptions& options,
                                           debug::CompileTrace& trace,
                                           const std::vector<Tensor>& inputs, size_t num_results) {
  const bool passes = !captured(*graph, options, trace);
  const std::string& prefix = trace.log_prefix();
  auto g = std::make_shared<Graph>(graph->clone());
  if (passes) stages::pre_grad(*g, trace);
  std::vector<bool> requires_grad;
  for (const Tensor& t : inputs) requires_grad.push_back(t.requires_grad());
  aot::JointGraph joint = stages::autograd(*g, requires_grad, num_results, trace);
  if (passes) {
    stages::decompositions(*joint.graph, trace);
    stages::joint_graph(*joint.graph, trace);
  }
  aot::Partition part = stages::partition(joint, trace);

  // Each half is a graph of its own from here: its own trace, its own graph cache entry.
  auto half = [&](std::shared_ptr<Graph> h, const std::string& name) {
    debug::CompileTrace half_trace(prefix + "_" + name, prefix + "_" + name, options, {});
    if (!passes) {
      half_trace.finish("eager: the graph runs on the interpreter");
      return interpreted(h);
    }
    std::string key;
    if (std::optional<capture::CompiledGraph> hit = cached(h, options, half_trace, key))
      return *hit;
    auto g = std::make_shared<Graph>(h->clone());
    stages::post_grad(*g, half_trace);
    return compile_inner(g, *h, key, options, half_trace);
  };
  capture::CompiledGraph forward = half(part.forward, "forward");
  capture::CompiledGraph backward = half(part.backward, "backward");
  trace.finish("a forward and a backward graph");
  return aot::training_function(graph, options, joint, part, forward, backward);
}

capture::CompiledGraph compile_fx(std::shared_ptr<const Graph> graph, const CompileOptions& options,
                                  const std::string& log_prefix) {
  debug::CompileTrace trace(log_prefix, log_prefix, options, {});
  return compile_fx(std::move(graph), options, trace);
}

}  // namespace coil
