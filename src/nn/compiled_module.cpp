// coil::compile(module): one compiled function per module state (train/eval modes, parameter
// and buffer layouts), each compiling module->forward on its first call.
#include <coil/autograd.h>
#include <coil/nn/compile.h>

#include <functional>
#include <map>
#include <mutex>

#include "runtime/tensor_impl.h"

namespace coil::nn {

using Forward = std::function<Tensor(const Tensor&)>;

struct CompiledModule::State {
  ModulePtr module;
  CompileOptions options;
  std::mutex mutex;
  std::map<std::vector<int64_t>, std::shared_ptr<CompiledFunction<Forward>>> variants;
};

namespace {

void append_tensor(std::vector<int64_t>& key, const Tensor& t) {
  const TensorImpl& impl = *t.impl();
  key.push_back(static_cast<int64_t>(impl.meta.dtype));
  key.push_back(impl.requires_grad);
  key.push_back(static_cast<int64_t>(impl.meta.sizes.size()));
  key.insert(key.end(), impl.meta.sizes.begin(), impl.meta.sizes.end());
  key.insert(key.end(), impl.meta.strides.begin(), impl.meta.strides.end());
  key.push_back(impl.meta.offset);
  key.push_back(static_cast<int64_t>(impl.meta.device.type));
  key.push_back(impl.meta.device.index);
  key.push_back(reinterpret_cast<intptr_t>(impl.storage.get()));
}

// Everything about the module that a captured graph may have baked in.
std::vector<int64_t> module_key(const Module& m) {
  std::vector<int64_t> key{grad_mode_enabled()};
  for (const auto& [name, sub] : m.named_modules()) key.push_back(sub->is_training());
  for (const Tensor& p : m.parameters()) append_tensor(key, p);
  key.push_back(-1);
  for (const Tensor& b : m.buffers()) append_tensor(key, b);
  return key;
}

}  // namespace

CompiledModule::CompiledModule(ModulePtr module, CompileOptions options)
    : state_(std::make_shared<State>()) {
  COIL_CHECK(module != nullptr, "coil::compile: the module pointer is null");
  if (options.name == CompileOptions{}.name) options.name = module->name();
  state_->module = std::move(module);
  state_->options = std::move(options);
}

Tensor CompiledModule::operator()(const Tensor& input) const {
  std::vector<int64_t> key = module_key(*state_->module);
  std::shared_ptr<CompiledFunction<Forward>> fn;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto& slot = state_->variants[key];
    if (!slot) {
      Forward forward = [m = state_->module](const Tensor& x) { return m->forward(x); };
      slot = std::make_shared<CompiledFunction<Forward>>(std::move(forward), state_->options);
    }
    fn = slot;
  }
  return (*fn)(input);
}

const ModulePtr& CompiledModule::module() const { return state_->module; }

size_t CompiledModule::num_variants() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->variants.size();
}

}  // namespace coil::nn
