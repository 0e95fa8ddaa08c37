// Eager ops on the GPU, run through the compiler itself (tinygrad's answer: one code path for
// eager and compiled code). A call becomes a graph of that one call, which the inductor
// pipeline compiles for the GPU like any other graph; the result is cached by the call's
// structure (op, literal arguments, the inputs' dtypes, sizes and strides), in memory and, as
// every compiled graph, in the disk caches, so a shape costs one compile per program and none
// in the next process. Library ops (matrix products, convolutions) and ops the compiler cannot
// lower (scans, pools, the random factories) run the backend's library kernel (cuBLASLt for the
// matrix products), or else their CPU kernel on copies of their inputs, the results copied
// back: slow, but every registry op runs.
#include <mutex>
#include <unordered_map>

#include <coil/error.h>

#include "backends/backend.h"
#include "compile/compile_fx.h"
#include "debug/log.h"
#include "decomp/decompose.h"
#include "graph/printer.h"
#include "lower/context.h"

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
               : Arg(run_eager(OpId::to_device, {*t, device}).at(0));
  if (auto* ts = std::get_if<std::vector<Tensor>>(&a)) {
    std::vector<Tensor> out;
    for (const Tensor& t : *ts)
      out.push_back(t.device() == device ? t : run_eager(OpId::to_device, {t, device}).at(0));
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
  for (size_t i = 0; i < outs.size(); ++i)
    if (outs[i].defined())
      outs[i] = run_eager(OpId::to_device, {outs[i], metas.at(i).device}).at(0);
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

// The call as a graph: a placeholder per tensor argument (tensor_inputs' order), the call, its
// results.
std::shared_ptr<const Graph> one_op_graph(OpId op, const std::vector<Arg>& args) {
  auto g = std::make_shared<Graph>();
  int inputs = 0;
  auto placeholder = [&](const Tensor& t) {
    return g->placeholder("in" + std::to_string(inputs++), meta_of(t));
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

// The cache key of a call: the op, then each argument's bytes (a tensor's dtype, device, sizes
// and strides; a literal's value). Cheap to build, as it is built on every call: the graph is
// made and printed only when the key is new.
class CallKey {
 public:
  explicit CallKey(OpId op) { put(static_cast<int64_t>(op)); }
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
    put_value(t.sizes());
    put_value(t.strides());
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
};

std::vector<Tensor> gpu_eager(OpId op, const std::vector<Arg>& args,
                              const std::vector<TensorMeta>& metas) {
  const backends::DeviceBackend& backend = backends::backend_for(metas.at(0).device);
  if (std::optional<std::vector<Tensor>> out = backend.library_kernel(op, args, metas)) return *out;
  if (!compilable(op)) {
    if (debug::log_enabled("device_eager"))
      debug::log("device_eager", op_name(op),
                 "has no " + metas.at(0).device.str() + " kernel: runs on the CPU, copying");
    return on_cpu(op, args, metas);
  }
  CallKey call(op);
  for (const Arg& a : args) call.add(a);
  const std::string key = call.take();
  static std::mutex mutex;
  static auto* cache = new std::unordered_map<std::string, capture::CompiledGraph>();
  capture::CompiledGraph compiled;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = cache->find(key); it != cache->end()) compiled = it->second;
  }
  active.push_back(op);
  struct Pop {
    ~Pop() { active.pop_back(); }
  } pop;
  if (!compiled.run) {
    std::shared_ptr<const Graph> g = one_op_graph(op, args);
    CompileOptions options;
    options.name = std::string("eager_") + op_name(op);
    options.options["async_compile"] = false;
    if (debug::log_enabled("device_eager"))
      debug::log("device_eager", op_name(op), "compiled for its arguments:\n" + print_graph(*g));
    compiled = compile_fx(g, options, options.name);
    std::lock_guard<std::mutex> lock(mutex);
    cache->emplace(key, compiled);
  }
  return compiled.run(tensor_inputs(args));
}

[[maybe_unused]] const bool installed = (install_device_eager(DeviceType::CUDA, gpu_eager), true);

}  // namespace

}  // namespace coil
