// The untyped core of coil::compile: check guards, capture on a miss, compile, cache, run;
// fall back to segmented execution after a graph break and to eager past the cache limit.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <shared_mutex>
#include <sstream>

#include <coil/compile.h>

#include "aot/aot_autograd.h"
#include "capture/counters.h"
#include "capture/guards.h"
#include "capture/tracer.h"
#include "compile/compile_backends.h"
#include "compile/compile_fx.h"
#include "compile/compile_settings.h"
#include "compile/cuda_graphs.h"
#include "debug/log.h"
#include "graph/printer.h"
#include "support/config.h"

namespace coil::detail {

using capture::bump;
using capture::Counter;

namespace {

void validate(const CompileOptions& o) {
  compile_backend(o.backend);  // throws for an unknown one, naming the known ones
  compile_mode(o.mode);        // throws for an unknown one, naming the known ones
  COIL_CHECK(o.cache_size_limit >= 1, "coil::compile: cache_size_limit must be at least 1, got ",
             o.cache_size_limit);
  compile_flags(o);  // throws for an unknown option or a value that is not a bool
}

bool disabled_by_env() { return config::flag(config::Var::Disable); }
std::atomic<int> g_disabled{-1};  // -1: not read yet
bool disabled() {
  int d = g_disabled.load(std::memory_order_relaxed);
  if (d < 0) {
    d = disabled_by_env();
    g_disabled = d;
  }
  return d;
}

// Where each flattened result comes from: graph output slots, or a number fixed at capture.
struct ResultSlot {
  enum class Kind : uint8_t { Tensor, TensorList, Number } kind;
  std::vector<size_t> outputs;
  Value number;
};

}  // namespace

struct CacheEntry {
  capture::Guards guards;
  bool segmented = false;  // a graph break: every call replays through the segment cache
  capture::CompiledGraph compiled;
  std::vector<capture::Mutation> mutations;
  std::vector<ResultSlot> results;
  size_t num_outputs = 0;
};

class CompiledFunctionImpl {
 public:
  explicit CompiledFunctionImpl(CompileOptions o) : options(std::move(o)) {
    static std::atomic<int> next_id{0};
    id = next_id++;
    if (records_cuda_graphs(compile_mode(options.mode))) graph_pool = make_cuda_graph_pool();
  }

  ValueList call(const ValueList& inputs, const std::function<ValueList(const ValueList&)>& run);
  void reset() {
    std::unique_lock lock(mutex);
    entries.clear();
    segments.clear();
    changed_dims.clear();
    warned_limit = false;
  }

  CompileOptions options;
  int id;

 private:
  std::string prefix(size_t entry) const {
    return options.name + "[" + std::to_string(id) + "/" + std::to_string(entry) + "]";
  }
  ValueList run_entry(const CacheEntry& e, const ValueList& inputs);
  // The graph's name in debug folders: "fn_0_1".
  std::string folder(const std::string& graph) const {
    return options.name + "_" + std::to_string(id) + "_" + graph;
  }
  // `dynamic`: for each tensor input (flattened), the dims captured with size symbols.
  ValueList trace(const ValueList& inputs, const std::function<ValueList(const ValueList&)>& run,
                  CacheEntry* capture_into, debug::CompileTrace* compile_trace = nullptr,
                  const std::vector<uint64_t>& dynamic = {});
  std::vector<uint64_t> dynamic_dims(const ValueList& inputs) const;
  // Automatic dynamic: the dims whose size differs from the last graph's join changed_dims.
  void note_changed_sizes(const ValueList& inputs);
  capture::CompiledGraph compile_segment(std::shared_ptr<const Graph> g);

  std::shared_mutex mutex;
  std::vector<std::unique_ptr<CacheEntry>> entries;
  // Automatic dynamic shapes: per tensor input (flattened), the dims whose size changed
  // between calls; later captures make them symbolic.
  std::vector<uint64_t> changed_dims;
  bool warned_limit = false;
  std::mutex segments_mutex;
  std::unordered_map<std::string, capture::CompiledGraph> segments;
  // mode="reduce-overhead": the memory pool of the function's CUDA graphs.
  std::shared_ptr<CudaGraphPool> graph_pool;
};

namespace {
std::mutex g_registry_mutex;
std::vector<std::weak_ptr<CompiledFunctionImpl>>& registry() {
  static std::vector<std::weak_ptr<CompiledFunctionImpl>> r;
  return r;
}

std::vector<Tensor> tensors_of(const ValueList& values) {
  std::vector<Tensor> out;
  for (const auto& v : values) {
    if (auto* t = std::get_if<Tensor>(&v)) out.push_back(*t);
    if (auto* l = std::get_if<std::vector<Tensor>>(&v)) out.insert(out.end(), l->begin(), l->end());
  }
  return out;
}

// A key that is equal for graphs that compute the same thing on the same captured tensors.
std::string structural_key(const Graph& g) {
  std::ostringstream os;
  os << print_graph(g);
  for (const Node* n : g.nodes())
    if (n->kind() == NodeKind::Parameter) os << "|" << n->value().impl();
  return os.str();
}

// CompileOptions::suppress_errors, else COIL_SUPPRESS_ERRORS=1.
bool suppress_errors(const CompileOptions& options) {
  if (options.suppress_errors) return *options.suppress_errors;
  return config::flag(config::Var::SuppressErrors);
}

// `compile` with the function's options. With suppress_errors a compile that fails (no
// compiler, a compiler that crashes, a bug in coil) gives the graph to the eager backend
// instead, with a warning; the C++ compiler then runs before the first call rather than beside
// it, so that its failure shows here.
template <typename Compile>
capture::CompiledGraph compile_or_eager(const CompileOptions& options, Compile&& compile) {
  if (!suppress_errors(options)) return compile(options);
  CompileOptions now = options;
  now.options["async_compile"] = false;
  try {
    return compile(now);
  } catch (const std::exception& e) {
    capture::bump(capture::Counter::suppressed_errors);
    debug::warn("compiling '" + options.name +
                "' failed; it runs eagerly instead (suppress_errors): " + e.what());
    CompileOptions eager = options;
    eager.backend = "eager";
    return compile(eager);
  }
}

}  // namespace

capture::CompiledGraph CompiledFunctionImpl::compile_segment(std::shared_ptr<const Graph> g) {
  std::string key = structural_key(*g);
  std::lock_guard<std::mutex> lock(segments_mutex);
  if (auto it = segments.find(key); it != segments.end()) {
    bump(Counter::cache_hits);
    return it->second;
  }
  bump(Counter::cache_misses);
  std::string n = "segment" + std::to_string(segments.size());
  debug::CompileTrace trace(options.name + "[" + std::to_string(id) + "/" + n + "]", folder(n),
                            options,
                            {{"function", options.name},
                             {"graph", std::to_string(id) + "/" + n},
                             {"trigger", "a graph break: the segment before it runs compiled"}});
  capture::CompiledGraph cg =
      compile_or_eager(options, [&](const CompileOptions& o) { return compile_fx(g, o, trace); });
  // While gradients are needed, a segment runs op by op so that eager autograd records it.
  auto compiled = cg.run;
  cg.run = [compiled, g](const std::vector<Tensor>& in) {
    return aot::needs_joint_graph(*g, in) ? aot::eager_autograd_graph(g).run(in) : compiled(in);
  };
  segments.emplace(std::move(key), cg);
  return cg;
}

// Runs `run` on proxies (or, after a break, in segments). With `capture_into`, a graph
// without breaks is compiled into that entry (its compile recorded in `compile_trace`) and
// run; the results are always real.
std::vector<uint64_t> CompiledFunctionImpl::dynamic_dims(const ValueList& inputs) const {
  std::vector<uint64_t> out;
  if (options.dynamic == false) return out;
  for (const Tensor& t : tensors_of(inputs)) {
    const size_t i = out.size();
    uint64_t mask =
        options.dynamic == true ? ~uint64_t{0} : (i < changed_dims.size() ? changed_dims[i] : 0);
    if (t.defined()) mask = (mask | t.impl()->marked_dynamic) & ~t.impl()->marked_static;
    out.push_back(mask);
  }
  return out;
}

void CompiledFunctionImpl::note_changed_sizes(const ValueList& inputs) {
  std::vector<uint64_t> changed = entries.back()->guards.changed_sizes(inputs);
  if (changed_dims.size() < changed.size()) changed_dims.resize(changed.size(), 0);
  for (size_t i = 0; i < changed.size(); ++i) {
    const uint64_t fresh = changed[i] & ~changed_dims[i];
    changed_dims[i] |= changed[i];
    for (int d = 0; d < 64; ++d)
      if (fresh >> d & 1)
        debug::log("dynamic", prefix(entries.size()),
                   "automatic dynamic: tensor input " + std::to_string(i) + " dim " +
                       std::to_string(d) + " changed size; capturing it as a symbol");
  }
}

ValueList CompiledFunctionImpl::trace(const ValueList& inputs,
                                      const std::function<ValueList(const ValueList&)>& run,
                                      CacheEntry* capture_into, debug::CompileTrace* compile_trace,
                                      const std::vector<uint64_t>& dynamic) {
  auto capture_start = debug::Clock::now();
  capture::Tracer tracer(
      options, [this](std::shared_ptr<const Graph> g) { return compile_segment(std::move(g)); });
  ValueList proxies;
  size_t k = 0;  // tensors so far
  auto name = [&](size_t i) {
    return i < options.arg_names.size() ? options.arg_names[i] : "arg" + std::to_string(i);
  };
  auto dims = [&] { return k < dynamic.size() ? dynamic[k] : 0; };
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (auto* t = std::get_if<Tensor>(&inputs[i])) {
      proxies.push_back(tracer.input(*t, name(i), dims()));
      ++k;
    } else if (auto* l = std::get_if<std::vector<Tensor>>(&inputs[i])) {
      std::vector<Tensor> ps;
      for (size_t j = 0; j < l->size(); ++j, ++k)
        ps.push_back(tracer.input((*l)[j], name(i) + "_" + std::to_string(j), dims()));
      proxies.push_back(std::move(ps));
    } else {
      proxies.push_back(inputs[i]);
    }
  }
  ValueList results;
  {
    DispatchHookScope tracing(&tracer);
    results = run(proxies);
  }

  std::vector<Tensor> result_tensors = tensors_of(results);
  std::vector<capture::Mutation> mutations;
  std::shared_ptr<Graph> graph = tracer.finish(result_tensors, mutations);
  if (compile_trace)
    compile_trace->timeline().add("capture", "capture", capture_start,
                                  debug::Clock::now() - capture_start);
  if (!graph) {  // a break happened: the results have their data already
    if (capture_into) capture_into->segmented = true;
    if (capture_into && graph_pool)
      debug::log("cudagraphs", prefix(entries.size()),
                 "a graph break: the segments run without CUDA graphs");
    if (compile_trace) compile_trace->finish("graph break: runs in compiled segments");
    return results;
  }
  std::vector<Tensor> real_inputs = tensors_of(inputs);
  if (!capture_into) {  // a replay that happened to run without a break
    capture::CompiledGraph cg = compile_segment(graph);
    auto outs = capture::run_with_mutations(cg, real_inputs, mutations, result_tensors.size());
    size_t next = 0;
    for (auto& v : results) {
      if (auto* t = std::get_if<Tensor>(&v)) *t = outs[next++];
      if (auto* l = std::get_if<std::vector<Tensor>>(&v))
        for (auto& t : *l) t = outs[next++];
    }
    return results;
  }
  // A whole graph: compile it once for this entry.
  CacheEntry& e = *capture_into;
  COIL_ASSERT(compile_trace, "a captured graph is compiled with its compile trace");
  e.guards.guard_captured(*graph);
  if (std::string captured = e.guards.captured_str(); !captured.empty()) {
    debug::log("guards", prefix(entries.size()), "guards on captured tensors:\n" + captured);
    compile_trace->write("guards.txt", [&] { return e.guards.str(options.arg_names); });
  }
  size_t next = 0;
  for (const auto& v : results) {
    ResultSlot slot;
    if (std::holds_alternative<Tensor>(v)) {
      slot.kind = ResultSlot::Kind::Tensor;
      slot.outputs.push_back(next++);
    } else if (auto* l = std::get_if<std::vector<Tensor>>(&v)) {
      slot.kind = ResultSlot::Kind::TensorList;
      for (size_t j = 0; j < l->size(); ++j) slot.outputs.push_back(next++);
    } else {
      slot.kind = ResultSlot::Kind::Number;
      slot.number = v;
    }
    e.results.push_back(std::move(slot));
  }
  e.num_outputs = next;
  e.mutations = std::move(mutations);
  const bool training = aot::needs_joint_graph(*graph, real_inputs);
  e.compiled = compile_or_eager(options, [&](const CompileOptions& o) {
    return training
               ? compile_fx_training(graph, o, *compile_trace, real_inputs, result_tensors.size())
               : compile_fx(graph, o, *compile_trace);
  });
  if (graph_pool && training)
    debug::log("cudagraphs", prefix(entries.size()),
               "a training graph (autograd records it) runs without CUDA graphs");
  else if (graph_pool)
    e.compiled.run = cuda_graph_run(graph_pool, std::move(e.compiled.run), prefix(entries.size()));
  // Compiling may have added size guards (lowering decides with the hints): collected now.
  e.guards.guard_symbols(*graph);
  if (e.guards.is_dynamic()) {
    std::string guards = e.guards.str(options.arg_names);
    debug::log("guards", prefix(entries.size()), "guards of the dynamic graph:\n" + guards);
    compile_trace->write("guards.txt", [&] { return guards; });
  }
  return run_entry(e, inputs);
}

ValueList CompiledFunctionImpl::run_entry(const CacheEntry& e, const ValueList& inputs) {
  std::vector<Tensor> outs =
      capture::run_with_mutations(e.compiled, tensors_of(inputs), e.mutations, e.num_outputs);
  ValueList results;
  results.reserve(e.results.size());
  for (const ResultSlot& s : e.results) {
    switch (s.kind) {
      case ResultSlot::Kind::Tensor:
        results.emplace_back(outs[s.outputs[0]]);
        break;
      case ResultSlot::Kind::TensorList: {
        std::vector<Tensor> l;
        for (size_t i : s.outputs) l.push_back(outs[i]);
        results.emplace_back(std::move(l));
        break;
      }
      case ResultSlot::Kind::Number:
        results.push_back(s.number);
        break;
    }
  }
  return results;
}

ValueList CompiledFunctionImpl::call(const ValueList& inputs,
                                     const std::function<ValueList(const ValueList&)>& run) {
  // Inside another function's capture, this one is inlined into that graph.
  if (disabled() || current_dispatch_hook()) return run(inputs);
  CacheEntry* hit = nullptr;
  {
    std::shared_lock lock(mutex);
    for (const auto& e : entries)
      if (e->guards.check(inputs)) {
        hit = e.get();
        break;
      }
  }
  if (hit) {
    bump(Counter::guard_hits);
    return hit->segmented ? trace(inputs, run, nullptr) : run_entry(*hit, inputs);
  }

  std::unique_lock lock(mutex);
  for (const auto& e : entries)  // another thread may have compiled it meanwhile
    if (e->guards.check(inputs)) {
      hit = e.get();
      break;
    }
  if (hit) {
    lock.unlock();
    bump(Counter::guard_hits);
    return hit->segmented ? trace(inputs, run, nullptr) : run_entry(*hit, inputs);
  }
  if (static_cast<int64_t>(entries.size()) >= options.cache_size_limit) {
    if (!warned_limit) {
      warned_limit = true;
      std::cerr << "coil: '" << options.name << "' reached cache_size_limit ("
                << options.cache_size_limit
                << " compiled variants); further new input shapes/values run eagerly\n";
    }
    lock.unlock();
    bump(Counter::eager_fallbacks);
    return run(inputs);
  }
  std::string trigger = "first call";
  if (!entries.empty()) {
    bump(Counter::recompiles);
    auto why = entries.back()->guards.why_not(inputs, options.arg_names);
    trigger = "recompile: " + why.value_or("no cached graph matched");
    debug::log("recompiles", prefix(entries.size()),
               "recompiling " + options.name + ": " + why.value_or("no cached graph matched"));
    if (!options.dynamic.has_value()) note_changed_sizes(inputs);
  }
  bump(Counter::captures);
  auto entry = std::make_unique<CacheEntry>();
  entry->guards = capture::Guards::from_inputs(inputs);
  std::string guards = entry->guards.str(options.arg_names);
  debug::log("guards", prefix(entries.size()), "guards:\n" + guards);
  // The compile starts here, with capture: its timeline and debug folder.
  std::string graph_id = std::to_string(id) + "/" + std::to_string(entries.size());
  debug::CompileTrace compile_trace(
      prefix(entries.size()), folder(std::to_string(entries.size())), options,
      {{"function", options.name}, {"graph", graph_id}, {"trigger", trigger}, {"guards", guards}});
  compile_trace.write("guards.txt", [&] { return guards; });
  ValueList results = trace(inputs, run, entry.get(), &compile_trace, dynamic_dims(inputs));
  entries.push_back(std::move(entry));
  return results;
}

std::shared_ptr<CompiledFunctionImpl> make_compiled_function(CompileOptions options) {
  validate(options);
  auto impl = std::make_shared<CompiledFunctionImpl>(std::move(options));
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  auto& r = registry();
  r.erase(std::remove_if(r.begin(), r.end(), [](const auto& w) { return w.expired(); }), r.end());
  r.push_back(impl);
  return impl;
}

ValueList call_compiled(CompiledFunctionImpl& impl, const ValueList& inputs,
                        const std::function<ValueList(const ValueList&)>& run) {
  return impl.call(inputs, run);
}

}  // namespace coil::detail

namespace coil {

namespace {
TensorImpl& marked(const Tensor& t, int64_t dim, const char* fn) {
  COIL_CHECK(t.defined(), fn, ": the tensor is undefined");
  COIL_CHECK(dim >= -t.dim() && dim < t.dim() && t.dim() <= 64, fn, ": dim ", dim,
             " is out of range for a tensor with ", t.dim(), " dims");
  return *t.impl();
}
}  // namespace

void mark_dynamic(const Tensor& t, int64_t dim) {
  TensorImpl& impl = marked(t, dim, "coil::mark_dynamic");
  if (dim < 0) dim += t.dim();
  const int64_t size = impl.meta.sizes[static_cast<size_t>(dim)];
  COIL_CHECK(size >= 2, "coil::mark_dynamic: dim ", dim, " has size ", size,
             "; sizes 0 and 1 are always specialised (as torch does), so it cannot be dynamic");
  impl.marked_dynamic |= uint64_t{1} << dim;
  impl.marked_static &= ~(uint64_t{1} << dim);
}

void mark_static_address(const Tensor& t) {
  COIL_CHECK(t.defined() && t.impl()->storage, "coil::mark_static_address: the tensor ",
             t.defined() ? "has no memory (a capture proxy)" : "is undefined");
  t.impl()->storage->static_address = true;
}

void mark_static(const Tensor& t, int64_t dim) {
  TensorImpl& impl = marked(t, dim, "coil::mark_static");
  if (dim < 0) dim += t.dim();
  impl.marked_static |= uint64_t{1} << dim;
  impl.marked_dynamic &= ~(uint64_t{1} << dim);
}

void compiler_reset() {
  {
    std::lock_guard<std::mutex> lock(detail::g_registry_mutex);
    for (const auto& w : detail::registry())
      if (auto impl = w.lock()) impl->reset();
  }
  capture::reset_counters();
  detail::g_disabled = -1;
  debug::reload_log_settings();
}

}  // namespace coil
