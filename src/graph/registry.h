// The op registry: every op's id, kind, schema, meta function and eager kernel, from
// op_list.def; and the dispatcher every op call goes through.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graph/arg.h"
#include "graph/schema.h"
#include "runtime/tensor_impl.h"

namespace coil {

enum class OpId : uint16_t {
#define COIL_OP(name, kind, schema) name,
#include "graph/op_list.def"
#undef COIL_OP
};
inline constexpr int kNumOps = 0
#define COIL_OP(name, kind, schema) +1
#include "graph/op_list.def"
#undef COIL_OP
    ;

enum class OpKind : uint8_t { Pointwise, Reduction, View, Factory, Extern, Composite, Other };

using MetaFn = std::vector<TensorMeta> (*)(const Args&);
using EagerFn = std::vector<Tensor> (*)(const Args&, const std::vector<TensorMeta>&);

struct OpInfo {
  OpId id;
  const char* name;
  OpKind kind;
  Schema schema;
  MetaFn meta;
  EagerFn eager;
  bool returns_list() const { return schema.returns == "Tensor[]"; }
};

const OpInfo& op_info(OpId op);
std::optional<OpId> find_op(const std::string& name);
inline const char* op_name(OpId op) { return op_info(op).name; }

// Views that only regroup the same elements in the same order (view, reshape, flatten,
// unflatten, squeeze, unsqueeze): a chain of them is one reshape.
bool is_reshape_like(OpId op);

// Completes `args` with the schema's defaults and checks every argument's type; a
// coil::Error names the op and the argument.
void normalize_args(OpId op, std::vector<Arg>& args);

// Runs the meta function only: validation and output description, no data touched.
std::vector<TensorMeta> run_meta(OpId op, const std::vector<Arg>& args);
// Meta, then the eager kernel: the reference path. `args` must be complete (normalize_args).
std::vector<Tensor> run_eager(OpId op, const std::vector<Arg>& args);

// Capture and autograd intercept op calls by installing a hook for the current thread.
class DispatchHook {
 public:
  virtual ~DispatchHook() = default;
  virtual std::vector<Tensor> call(OpId op, std::vector<Arg>& args) = 0;
  // An in-place update: `self` takes `value`'s contents (same sizes; dtype converted).
  virtual void assign(const Tensor& self, const Tensor& value) = 0;
};
DispatchHook* set_dispatch_hook(DispatchHook* hook);  // returns the previous one
DispatchHook* current_dispatch_hook();
// Installs `hook` (nullptr: none) for a scope, then restores the previous one.
class DispatchHookScope {
 public:
  explicit DispatchHookScope(DispatchHook* hook) : prev_(set_dispatch_hook(hook)) {}
  ~DispatchHookScope() { set_dispatch_hook(prev_); }
  DispatchHookScope(const DispatchHookScope&) = delete;
  DispatchHookScope& operator=(const DispatchHookScope&) = delete;

 private:
  DispatchHook* prev_;
};

// The dispatcher's autograd layer (PyTorch's Autograd dispatch key). src/autograd/ installs it
// when coil's library loads, so the dispatcher calls autograd without depending on it.
struct AutogradLayer {
  // Whether this call must be recorded: grad mode is on and a tensor argument requires grad.
  bool (*should_record)(const std::vector<Arg>& args) = nullptr;
  // Runs the op below autograd and records its grad_fn on the outputs.
  std::vector<Tensor> (*call)(OpId op, std::vector<Arg>& args) = nullptr;
  // After a view op ran outside capture: remembers which outputs alias their input.
  void (*note_views)(OpId op, const std::vector<Arg>& args,
                     const std::vector<Tensor>& outs) = nullptr;
};
void install_autograd_layer(const AutogradLayer& layer);

// Eager ops on a device other than the CPU (PyTorch's CUDA dispatch key). run_eager sends every
// op whose result is on that device, except views, to_device and the random factories (whose
// kernels are device-neutral), first to the kernel the device registered for the op, if any
// (a library's or one of coil's own: backends/cuda/eager_kernels.cpp), then, where there is
// none or it declines the arguments, to the device's fallback: compiling the call
// (compile/device_eager.cpp for CUDA).
using DeviceKernel = std::optional<std::vector<Tensor>> (*)(OpId op, const Args& args,
                                                            const std::vector<TensorMeta>& metas);
void register_device_kernel(DeviceType device, OpId op, DeviceKernel kernel);
using DeviceEager = std::vector<Tensor> (*)(OpId op, const std::vector<Arg>& args,
                                            const std::vector<TensorMeta>& metas);
void install_device_eager(DeviceType device, DeviceEager eager);

// The op below the autograd layer: the hook if one is installed, else run_eager.
std::vector<Tensor> call_below_autograd(OpId op, std::vector<Arg>& args);
// The entry point of every public op: autograd's recording when an input requires grad,
// then the hook if one is installed, else run_eager.
std::vector<Tensor> call_op(OpId op, std::vector<Arg> args);
inline Tensor call_op1(OpId op, std::vector<Arg> args) {
  return std::move(call_op(op, std::move(args)).at(0));
}

}  // namespace coil
