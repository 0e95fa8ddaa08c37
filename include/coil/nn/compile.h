// coil::compile(module): compiles a module's forward, as torch.compile(model).
//
//   auto model = std::make_shared<nn::Sequential>(...);
//   auto compiled = coil::compile(model);   // wraps only
//   Tensor y = compiled(x);                 // first call: capture model->forward, compile, run
//
// The module's parameters and buffers are tensors the forward captures (by reference: an
// optimizer's in-place updates and load_state_dict are seen without recompiling). What the
// captured graph assumed about the module is guarded on every call, as TorchDynamo guards on
// module attributes: grad mode, the train/eval mode of each submodule and the dtype, shape,
// layout, storage and requires_grad of each parameter and buffer. A change selects (or
// compiles) another variant. Only single-input forwards are wrapped; for a module with several
// inputs, compile a lambda that calls it.
#pragma once

#include <concepts>
#include <memory>

#include <coil/compile.h>
#include <coil/nn/module.h>

namespace coil::nn {

// What coil::compile(module) returns: a callable Tensor -> Tensor.
class CompiledModule {
 public:
  CompiledModule(ModulePtr module, CompileOptions options);
  Tensor operator()(const Tensor& input) const;
  Tensor forward(const Tensor& input) const { return (*this)(input); }
  const ModulePtr& module() const;
  // How many variants (module states) have been compiled so far.
  size_t num_variants() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace coil::nn

namespace coil {

template <typename M>
requires std::derived_from<M, nn::Module> nn::CompiledModule compile(std::shared_ptr<M> module,
                                                                     CompileOptions options = {}) {
  return nn::CompiledModule(std::move(module), std::move(options));
}

}  // namespace coil
