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

// The call as a graph: a placeholder per tensor argument, the call, its results; `inputs`
// receives the tensors the placeholders stand for.
std::shared_ptr<const Graph> one_op_graph(OpId op, const std::vector<Arg>& args,
                                          std::vector<Tensor>& inputs) {
  auto g = std::make_shared<Graph>();
  auto placeholder = [&](const Tensor& t) {
    inputs.push_back(t);
    return g->placeholder("in" + std::to_string(inputs.size() - 1), meta_of(t));
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
  std::vector<Tensor> inputs;
  std::shared_ptr<const Graph> g = one_op_graph(op, args, inputs);
  const std::string key = print_graph(*g);
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
    CompileOptions options;
    options.name = std::string("eager_") + op_name(op);
    options.options["async_compile"] = false;
    if (debug::log_enabled("device_eager"))
      debug::log("device_eager", op_name(op), "compiled for its arguments:\n" + key);
    compiled = compile_fx(g, options, options.name);
    std::lock_guard<std::mutex> lock(mutex);
    cache->emplace(key, compiled);
  }
  return compiled.run(inputs);
}

[[maybe_unused]] const bool installed = (install_device_eager(DeviceType::CUDA, gpu_eager), true);

}  // namespace

}  // namespace coil
