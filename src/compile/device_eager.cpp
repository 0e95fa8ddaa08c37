// Eager ops on the GPU, run through the compiler itself (tinygrad's answer: one code path for
// eager and compiled code). A call becomes a graph of that one call, which the inductor
// pipeline compiles for the GPU like any other graph. The graph is dynamic, with duck sizing as
// torch's dynamic shapes: equal sizes (and the strides of non-contiguous inputs) of 2 or more
// share one symbol, so that broadcasting needs no guard, and the compiled graph serves every
// call whose sizes and strides have the same pattern of equalities (a new shape or view costs no
// compile). When the dynamic graph would need guards its next call breaks, or a meta function
// needs numbers, the graph is static. The compiled graphs are cached by the call's structure
// (op, literal arguments, the inputs' dtypes and their size pattern, or sizes and strides), in
// memory and, as every compiled graph, in the
// disk caches, so none compiles again in the next process. Ops the device has a kernel of its
// own for (matrix products, convolutions, scans, pools: backends/cuda/eager_kernels.cpp) never
// come here (graph/registry.h); ops the compiler cannot lower run their CPU kernel on copies of
// their inputs, the results copied back: slow, but every registry op runs.
#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include <coil/error.h>

#include "backends/backend.h"
#include "compile/compile_fx.h"
#include "debug/log.h"
#include "decomp/decompose.h"
#include "graph/eager_destination.h"
#include "graph/printer.h"
#include "graph/shape_env.h"
#include "lower/context.h"
#include "runtime/copy.h"
#include "runtime/tensor_impl.h"

namespace coil {

namespace {

// Ops this thread is running through the compiler: a decomposition that declines brings the
// op back here as an extern call, which then runs on the CPU instead of compiling again.
thread_local std::vector<OpId> active;

bool compilable(OpId op) {
  if (op_info(op).kind == OpKind::Extern) return false;
  if (std::find(active.begin(), active.end(), op) != active.end()) return false;
  return lower::find_lowering(op) || find_decomposition(op);
}

Arg to_device(const Arg& a, const Device& device) {
  if (auto* t = std::get_if<Tensor>(&a))
    return !t->defined() || t->device() == device
               ? a
               : Arg(run_eager(OpId::to_device, {*t, device, false}).at(0));
  if (auto* ts = std::get_if<std::vector<Tensor>>(&a)) {
    std::vector<Tensor> out;
    for (const Tensor& t : *ts)
      out.push_back(t.device() == device ? t
                                         : run_eager(OpId::to_device, {t, device, false}).at(0));
    return out;
  }
  if (std::holds_alternative<Device>(a)) return device;  // a factory's device
  return a;
}

std::vector<Tensor> on_cpu(OpId op, const std::vector<Arg>& args,
                           const std::vector<TensorMeta>& metas) {
  std::vector<Arg> host;
  for (const Arg& a : args) host.push_back(to_device(a, kCPU));
  std::vector<Tensor> outs = run_eager(op, host);
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].defined()) continue;
    const TensorMeta& m = metas.at(i);
    outs[i] = run_eager(OpId::to_device, {outs[i], m.device, false}).at(0);
    // Laid out as the device's meta says where the CPU's differs (attention's output is stored
    // token-major on a GPU): a compiled graph's wrapper holds the call to that layout.
    if (outs[i].strides() != m.strides && outs[i].sizes() == m.sizes) {
      Tensor laid_out = empty_from_meta(m);
      copy_into(laid_out, outs[i]);
      outs[i] = laid_out;
    }
  }
  return outs;
}

// The tensors a call's graph takes, in the order of its placeholders.
std::vector<Tensor> tensor_inputs(const std::vector<Arg>& args) {
  std::vector<Tensor> inputs;
  for (const Arg& a : args) {
    if (auto* t = std::get_if<Tensor>(&a); t && t->defined()) inputs.push_back(*t);
    if (auto* ts = std::get_if<std::vector<Tensor>>(&a))
      inputs.insert(inputs.end(), ts->begin(), ts->end());
  }
  return inputs;
}

// Duck sizing: the distinct sizes (and strides of non-contiguous tensors) of 2 or more of a
// call's tensors, in order of appearance; symbol s<k> stands for values[k].
struct DuckSizes {
  std::vector<int64_t> values;
  size_t find(int64_t size) const {
    return static_cast<size_t>(std::find(values.begin(), values.end(), size) - values.begin());
  }
  size_t symbol(int64_t size) {  // found, or added
    if (find(size) == values.size()) values.push_back(size);
    return find(size);
  }
};

// Whether the call's graph can be dynamic: some size to vary.
bool duck_sized(const std::vector<Tensor>& inputs) {
  for (const Tensor& t : inputs)
    for (int64_t s : t.sizes())
      if (s >= 2) return true;
  return false;
}

// The call as a graph: a placeholder per tensor argument (tensor_inputs' order), the call, its
// results. With `duck`, the placeholders' sizes are its symbols, and so are the strides of the
// non-contiguous ones.
std::shared_ptr<const Graph> one_op_graph(OpId op, const std::vector<Arg>& args,
                                          const DuckSizes* duck) {
  auto g = std::make_shared<Graph>();
  if (duck) {
    auto env = std::make_shared<ShapeEnv>();
    for (size_t k = 0; k < duck->values.size(); ++k)
      env->create_symbol(duck->values[k], "eager size " + std::to_string(k));
    g->set_shape_env(env);
  }
  int inputs = 0;
  auto placeholder = [&](const Tensor& t) {
    std::optional<SymLayout> layout;
    if (duck) {
      auto symbolic = [&](const Shape& values) {
        SymShape out;
        for (int64_t v : values)
          out.push_back(v < 2 ? sym::constant(v) : g->shape_env()->symbols()[duck->find(v)].var);
        return out;
      };
      layout = SymLayout::contiguous(symbolic(t.sizes()));
      if (!t.is_contiguous()) layout->strides = symbolic(t.strides());
    }
    return g->placeholder("in" + std::to_string(inputs++), meta_of(t), layout);
  };
  std::vector<NodeArg> node_args;
  for (const Arg& a : args) {
    if (auto* t = std::get_if<Tensor>(&a)) {
      if (t->defined())
        node_args.emplace_back(placeholder(*t));
      else
        node_args.emplace_back(std::monostate{});
    } else if (auto* ts = std::get_if<std::vector<Tensor>>(&a)) {
      std::vector<Node*> nodes;
      for (const Tensor& t : *ts) nodes.push_back(placeholder(t));
      node_args.emplace_back(std::move(nodes));
    } else {
      node_args.push_back(to_node_arg(a));
    }
  }
  Node* call = g->call(op, node_args);
  std::vector<Node*> results;
  if (call->is_multi_output())
    for (size_t i = 0; i < call->meta().size(); ++i)
      results.push_back(g->getitem(call, static_cast<int64_t>(i)));
  else
    results.push_back(call);
  g->output(results);
  return g;
}

// The cache key of a call: the op, then each argument's bytes (a tensor's dtype, device, and
// sizes and strides, or with `duck` its rank and size pattern, and stride pattern when it is
// not contiguous; a literal's value). Cheap to
// build, as it is built on every call: the graph is made and printed only when the key is new.
class CallKey {
 public:
  CallKey(OpId op, DuckSizes* duck) : duck_(duck) {
    put(static_cast<int64_t>(op));
    put(duck != nullptr);
  }
  void add(const Arg& a) {
    key_ += static_cast<char>(a.index());
    std::visit([this](const auto& v) { put_value(v); }, a);
  }
  std::string take() { return std::move(key_); }

 private:
  template <typename T>
  void put(const T& v) {
    key_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void put_value(std::monostate) {}
  void put_value(const Tensor& t) {
    put(t.defined());
    if (!t.defined()) return;
    put(t.dtype());
    put(t.device().type);
    put(t.device().index);
    if (!duck_) {
      put_value(t.sizes());
      put_value(t.strides());
      return;
    }
    put(t.dim());
    put_pattern(t.sizes());
    put(t.is_contiguous());
    if (!t.is_contiguous()) put_pattern(t.strides());
  }
  void put_pattern(const Shape& values) {
    for (int64_t v : values) put(v < 2 ? v : -1 - static_cast<int64_t>(duck_->symbol(v)));
  }
  void put_value(const std::vector<Tensor>& ts) {
    put(ts.size());
    for (const Tensor& t : ts) put_value(t);
  }
  void put_value(const Scalar& s) {
    put(s.kind());
    s.is_floating() ? put(s.to_double()) : put(s.to_int());
  }
  void put_value(const Shape& v) {
    put(v.size());
    key_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int64_t));
  }
  void put_value(const std::string& v) {
    put(v.size());
    key_ += v;
  }
  void put_value(const Device& d) {
    put(d.type);
    put(d.index);
  }
  template <typename T>
  void put_value(const T& v) {  // int64_t, double, bool, DType
    put(v);
  }
  std::string key_;
  DuckSizes* duck_;
};

// A compiled call, with the size guards its compile added (a dynamic graph's only).
struct CompiledCall {
  capture::CompiledGraph graph;
  std::vector<SymGuard> guards;
  bool holds(const DuckSizes& duck) const {
    for (const SymGuard& g : guards)
      if (!g.holds_at(duck.values.data())) return false;
    return true;
  }
};

// Dynamic graphs per size pattern before the pattern's calls compile static graphs instead:
// each recompile follows a guard a call broke (a reduction too long for one block, say).
constexpr size_t kDynamicVariants = 4;

CompiledCall compile_call(OpId op, const std::vector<Arg>& args, const DuckSizes* duck) {
  std::shared_ptr<const Graph> g = one_op_graph(op, args, duck);
  CompileOptions options;
  options.name = std::string("eager_") + op_name(op);
  options.options["async_compile"] = false;
  if (debug::log_enabled("device_eager"))
    debug::log("device_eager", op_name(op),
               std::string("compiled for ") + (duck ? "its size pattern" : "its arguments") +
                   ":\n" + print_graph(*g));
  CompiledCall call{compile_fx(g, options, options.name), {}};
  if (duck) call.guards = g->shape_env()->guards();
  return call;
}

// The compiled calls of a key: several dynamic graphs (each for the sizes its guards admit),
// or one static graph. Entries are never removed, so pointers to them stay valid.
struct CallCache {
  std::mutex mutex;
  std::unordered_map<std::string, std::vector<std::unique_ptr<const CompiledCall>>> calls;

  std::unordered_set<std::string> static_only;  // size patterns whose graphs cannot be dynamic

  // The first of key's calls whose guards hold, and whether another may be compiled for it.
  std::pair<const CompiledCall*, bool> find(const std::string& key, const DuckSizes& duck) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = calls.find(key);
    const size_t compiled = it == calls.end() ? 0 : it->second.size();
    for (size_t i = 0; i < compiled; ++i)
      if (it->second[i]->holds(duck)) return {it->second[i].get(), false};
    return {nullptr, compiled < kDynamicVariants && !static_only.count(key)};
  }
  void mark_static(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex);
    static_only.insert(key);
  }
  const CompiledCall* add(const std::string& key, CompiledCall call) {
    std::lock_guard<std::mutex> lock(mutex);
    auto& list = calls[key];
    list.push_back(std::make_unique<const CompiledCall>(std::move(call)));
    return list.back().get();
  }
};

// The compiled call run, its result written into an in-place method's tensor when one is
// offered (EagerDestination) and no input overlaps it other than as the very same view (a
// pointwise kernel reads each element before it writes it).
std::vector<Tensor> run_call(OpId op, const CompiledCall& call, const std::vector<Tensor>& inputs) {
  std::optional<Tensor> into = EagerDestination::take(op);
  if (into && op_info(op).kind == OpKind::Pointwise) {
    const TensorImpl& dest = *into->impl();
    const bool apart = std::all_of(inputs.begin(), inputs.end(), [&](const Tensor& t) {
      return t.impl()->storage != dest.storage || t.impl()->meta == dest.meta;
    });
    if (apart && call.graph.run_into) return call.graph.run_into(inputs, *into);
  }
  return call.graph.run(inputs);
}

std::vector<Tensor> gpu_eager(OpId op, const std::vector<Arg>& args,
                              const std::vector<TensorMeta>& metas) {
  if (!compilable(op)) {
    if (debug::log_enabled("device_eager"))
      debug::log("device_eager", op_name(op),
                 "has no " + metas.at(0).device.str() + " kernel: runs on the CPU, copying");
    return on_cpu(op, args, metas);
  }
  active.push_back(op);
  struct Pop {
    ~Pop() { active.pop_back(); }
  } pop;
  static auto* cache = new CallCache;
  auto key_of = [&](DuckSizes* duck) {
    CallKey key(op, duck);
    for (const Arg& a : args) key.add(a);
    return key.take();
  };
  const std::vector<Tensor> inputs = tensor_inputs(args);
  if (duck_sized(inputs)) {
    DuckSizes duck;
    const std::string key = key_of(&duck);
    auto [call, may_compile] = cache->find(key, duck);
    if (!call && may_compile) {
      try {
        call = cache->add(key, compile_call(op, args, &duck));
      } catch (const std::exception& e) {  // a meta function that needs numbers: static
        debug::log("device_eager", op_name(op), std::string("static graphs: ") + e.what());
        cache->mark_static(key);
      }
    }
    if (call) return run_call(op, *call, inputs);
  }
  const DuckSizes none;
  const std::string key = key_of(nullptr);
  const CompiledCall* call = cache->find(key, none).first;
  if (!call) call = cache->add(key, compile_call(op, args, nullptr));
  return run_call(op, *call, inputs);
}

[[maybe_unused]] const bool installed = (install_device_eager(DeviceType::CUDA, gpu_eager), true);

}  // namespace

}  // namespace coil
