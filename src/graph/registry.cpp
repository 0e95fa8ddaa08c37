#include "graph/registry.h"

#include <array>
#include <unordered_map>

#include "graph/autocast.h"
#include "graph/op_impl.h"
#include "runtime/profiler.h"

namespace coil {

namespace {
struct Registry {
  std::vector<OpInfo> ops;
  std::unordered_map<std::string, OpId> by_name;
  Registry() {
#define COIL_OP(name, kind, schema)                                                             \
  ops.push_back(OpInfo{OpId::name, #name, OpKind::kind, parse_schema(schema), ops::meta_##name, \
                       ops::eager_##name});
#include "graph/op_list.def"
#undef COIL_OP
    for (const auto& op : ops) by_name.emplace(op.name, op.id);
  }
};
const Registry& registry() {
  static const Registry r;
  return r;
}
thread_local DispatchHook* tls_hook = nullptr;
}  // namespace

const OpInfo& op_info(OpId op) { return registry().ops[static_cast<size_t>(op)]; }

std::optional<OpId> find_op(const std::string& name) {
  const auto& m = registry().by_name;
  auto it = m.find(name);
  return it == m.end() ? std::nullopt : std::optional<OpId>(it->second);
}

bool is_reshape_like(OpId op) {
  switch (op) {
    case OpId::view:
    case OpId::reshape:
    case OpId::flatten:
    case OpId::unflatten:
    case OpId::squeeze:
    case OpId::unsqueeze:
      return true;
    default:
      return false;
  }
}

void normalize_args(OpId op, std::vector<Arg>& args) {
  const OpInfo& info = op_info(op);
  const auto& params = info.schema.args;
  COIL_CHECK(args.size() <= params.size(), info.name, ": takes at most ", params.size(),
             " arguments but got ", args.size(), "; schema: ", info.schema.str());
  for (size_t i = args.size(); i < params.size(); ++i) {
    COIL_CHECK(params[i].default_value.has_value(), info.name, ": missing argument '",
               params[i].name, "'; schema: ", info.schema.str());
    args.push_back(*params[i].default_value);
  }
  bool scalar_ok = info.kind == OpKind::Pointwise;
  for (size_t i = 0; i < params.size(); ++i) {
    COIL_CHECK(arg_matches(args[i], params[i].type, scalar_ok), info.name, ": argument '",
               params[i].name, "' must be ", params[i].type, " but got ", arg_kind_name(args[i]),
               "; schema: ", info.schema.str());
  }
}

std::vector<TensorMeta> run_meta(OpId op, const std::vector<Arg>& args) {
  return op_info(op).meta(Args(args));
}

namespace {
DeviceEager cuda_eager = nullptr;  // installed by the layer that runs ops on the GPU
// The GPU's kernels by op, registered as coil's library loads.
std::array<DeviceKernel, kNumOps>& cuda_kernels() {
  static std::array<DeviceKernel, kNumOps> kernels{};
  return kernels;
}
}  // namespace

void register_device_kernel(DeviceType device, OpId op, DeviceKernel kernel) {
  COIL_ASSERT(device == DeviceType::CUDA, "device eager kernels are for the GPU");
  cuda_kernels()[static_cast<size_t>(op)] = kernel;
}

void install_device_eager(DeviceType device, DeviceEager eager) {
  COIL_ASSERT(device == DeviceType::CUDA, "device eager kernels are for the GPU");
  cuda_eager = eager;
}

// Ops whose eager kernel runs on any device: views and moves touch no elements, the random
// factories draw with the runtime's generator, which has device kernels (runtime/random.h).
bool device_neutral(const OpInfo& info) {
  switch (info.id) {
    case OpId::to_device:
    case OpId::rand:
    case OpId::randn:
    case OpId::randint:
      return true;
    default:
      return info.kind == OpKind::View;
  }
}

std::vector<Tensor> run_eager(OpId op, const std::vector<Arg>& args) {
  const OpInfo& info = op_info(op);
  Args a(args);
  std::vector<TensorMeta> out = info.meta(a);
  ProfileScope profiled("eager", info.name, out.empty() ? kCPU : out[0].device);
  if (!out.empty() && out[0].device.is_cuda() && !device_neutral(info)) {
    if (DeviceKernel kernel = cuda_kernels()[static_cast<size_t>(op)])
      if (std::optional<std::vector<Tensor>> results = kernel(op, a, out)) return *results;
    COIL_CHECK(cuda_eager, info.name, ": no kernels for ", out[0].device.str(),
               " (coil was built without CUDA)");
    return cuda_eager(op, args, out);
  }
  return info.eager(a, out);
}

DispatchHook* set_dispatch_hook(DispatchHook* hook) {
  DispatchHook* prev = tls_hook;
  tls_hook = hook;
  return prev;
}
DispatchHook* current_dispatch_hook() { return tls_hook; }

std::vector<Tensor> call_below_autograd(OpId op, std::vector<Arg>& args) {
  if (tls_hook) return tls_hook->call(op, args);
  return run_eager(op, args);
}

namespace {
AutogradLayer autograd_layer;  // constant-initialised: empty until autograd installs itself
}  // namespace

void install_autograd_layer(const AutogradLayer& layer) { autograd_layer = layer; }

namespace {

// A CPU 0-dim tensor goes with tensors on a GPU in a pointwise op, as torch's CPU scalars do: it
// is copied to their device first (a to_device call, so autograd and capture see it as any
// other op). Any other mix of devices stays an error of the op's meta function.
void move_cpu_scalars(OpId op, std::vector<Arg>& args) {
  if (op_info(op).kind != OpKind::Pointwise) return;
  std::optional<Device> device;
  for (const Arg& a : args)
    if (auto* t = std::get_if<Tensor>(&a); t && t->defined() && !t->device().is_cpu())
      device = t->device();
  if (!device) return;
  for (Arg& a : args)
    if (auto* t = std::get_if<Tensor>(&a);
        t && t->defined() && t->device().is_cpu() && t->dim() == 0)
      a = call_op(OpId::to_device, {*t, *device, false}).at(0);
}

}  // namespace

// The dispatch order is PyTorch's: autograd first (it records, then calls below itself),
// then capture or the eager kernel.
std::vector<Tensor> call_op(OpId op, std::vector<Arg> args) {
  OpScope inside;
  normalize_args(op, args);
  move_cpu_scalars(op, args);
  if (autocast_active()) apply_autocast(op, args);  // before autograd: it records the casts
  const AutogradLayer& ag = autograd_layer;
  std::vector<Tensor> outs = ag.should_record && ag.should_record(args)
                                 ? ag.call(op, args)
                                 : call_below_autograd(op, args);
  if (ag.note_views && op_info(op).kind == OpKind::View && !current_dispatch_hook())
    ag.note_views(op, args, outs);
  return outs;
}

}  // namespace coil
