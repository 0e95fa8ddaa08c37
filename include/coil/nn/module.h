// nn::Module, the base of every layer, as torch.nn.Module: named parameters and buffers,
// submodules, train/eval, dtype/device moves, state_dict and safetensors checkpoints.
//
//   struct Net : coil::nn::Module {
//     std::shared_ptr<coil::nn::Linear> fc1, fc2;
//     Net() {
//       fc1 = register_module("fc1", std::make_shared<coil::nn::Linear>(4, 8));
//       fc2 = register_module("fc2", std::make_shared<coil::nn::Linear>(8, 2));
//     }
//     coil::Tensor forward(const coil::Tensor& x) override {
//       return fc2->forward(coil::relu(fc1->forward(x)));
//     }
//   };
//   auto net = std::make_shared<Net>();
//   net->named_parameters();  // fc1.weight, fc1.bias, fc2.weight, fc2.bias
//   net->save("net.safetensors");
//
// Modules are held by std::shared_ptr. A parameter is a leaf tensor that requires grad; the
// module and the layer's members (Linear::weight, ...) hold handles to the same tensor, so
// optimizers, load_state_dict and to() all update what forward reads. To give a parameter new
// values, load them (load_state_dict) or copy_ into it under NoGradGuard; do not assign a new
// tensor to the member.
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <coil/device.h>
#include <coil/dtype.h>
#include <coil/nn/state_dict.h>
#include <coil/tensor.h>

namespace coil::nn {

class Module;
using ModulePtr = std::shared_ptr<Module>;

// What load_state_dict(..., strict=false) found (PyTorch's _IncompatibleKeys).
struct LoadResult {
  std::vector<std::string> missing_keys;     // expected by the module, absent from the dict
  std::vector<std::string> unexpected_keys;  // in the dict, not in the module
};

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The class name as PyTorch prints it ("Linear", "Net"); from the dynamic type by default.
  virtual std::string name() const;
  // The module's settings inside its printed form: "in_features=4, out_features=8, bias=True".
  virtual std::string extra_repr() const { return ""; }

  // The computation of a module with one input. The base version throws coil::Error: override
  // it (modules with several inputs, as MultiheadAttention, add their own overloads).
  virtual Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input) { return forward(input); }

  // ---- registration -----------------------------------------------------------------------
  // Registers `param` under `name` and returns it. It becomes a parameter: requires_grad_ is set
  // to `requires_grad` (only floating-point tensors can require grad). An undefined tensor
  // registers an absent parameter (PyTorch's `None`, as Linear's bias with bias=false): it is
  // skipped by parameters() and state_dict(). Names are unique among a module's parameters,
  // buffers and submodules, non-empty and without '.'.
  Tensor register_parameter(const std::string& name, Tensor param, bool requires_grad = true);
  // A buffer: state that is not trained (BatchNorm's running_mean). Non-persistent buffers are
  // left out of state_dict().
  Tensor register_buffer(const std::string& name, Tensor buffer, bool persistent = true);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_module(name, module);
    return module;
  }

  // ---- traversal (PyTorch's order: a module's own entries, then each child's, depth first) --
  // Each distinct tensor once (a parameter shared by two modules is listed under its first
  // name), as PyTorch's remove_duplicate=True.
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<ModulePtr> children() const;
  const std::vector<std::pair<std::string, ModulePtr>>& named_children() const { return children_; }
  // This module (named "") and every descendant, depth first. The pointers live as long as
  // this module does.
  std::vector<std::pair<std::string, Module*>> named_modules();
  std::vector<std::pair<std::string, const Module*>> named_modules() const;

  // Look-ups by dotted name ("encoder.0.weight"); an unknown name is a coil::Error.
  Tensor get_parameter(const std::string& target) const;
  Tensor get_buffer(const std::string& target) const;
  ModulePtr get_submodule(const std::string& target) const;

  // Calls fn on every submodule (children first, depth first), then on this module.
  void apply(const std::function<void(Module&)>& fn);

  // ---- mode ----------------------------------------------------------------------------------
  // Training mode (the default) or evaluation mode, for this module and every descendant.
  // Dropout and BatchNorm behave differently in the two.
  Module& train(bool on = true);
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }

  // ---- moves ---------------------------------------------------------------------------------
  // Converts every floating-point parameter and buffer (and gradient) to `dtype`, in place: the
  // tensors keep their identity, so optimizers and members still see them. Integer buffers
  // (BatchNorm's num_batches_tracked) stay as they are.
  Module& to(DType dtype);
  // Moves every parameter and buffer (and gradient) to `device`, in place.
  Module& to(Device device);
  // Lays every 4-D parameter and buffer (a convolution's weights) out in `format`, in place, as
  // torch's module.to(memory_format=...): with channels-last weights, a convolution's output is
  // channels-last too.
  Module& to(MemoryFormat format);

  // Clears every parameter's gradient (set_to_none, the default as in PyTorch 2) or fills it
  // with zeros.
  void zero_grad(bool set_to_none = true);

  // ---- checkpoints ---------------------------------------------------------------------------
  // Every parameter and persistent buffer by dotted name, in traversal order. The values share
  // storage with the module's tensors (detached: they do not require grad).
  StateDict state_dict() const;
  // Copies the values of `dict` into the module's tensors (converting dtype when they differ).
  // A shape mismatch is always an error naming the key and both shapes; missing and unexpected
  // keys are errors when strict, else reported in the result. Nothing is copied when it throws.
  LoadResult load_state_dict(const StateDict& dict, bool strict = true);
  // state_dict() to / load_state_dict() from a safetensors file (coil/nn/safetensors.h).
  void save(const std::string& path) const;
  LoadResult load(const std::string& path, bool strict = true);

  // As PyTorch's repr: the name, the settings and each child on its own line.
  std::string str() const;

 protected:
  void add_module(const std::string& name, ModulePtr module);

 private:
  struct Entry {
    std::string name;
    Tensor tensor;  // undefined: registered as absent
    bool persistent = true;
  };
  void check_new_name(const std::string& name, const char* what) const;
  // Every module reachable from this one with its dotted prefix ("" for this one); with
  // `dedupe`, a module reachable twice is listed once.
  void collect(const std::string& prefix, bool dedupe,
               std::vector<std::pair<std::string, const Module*>>& out) const;
  // Parameters or buffers of this module (and its descendants when `recurse`); `dedupe` lists
  // each tensor and module once; `persistent_only` leaves out non-persistent buffers.
  std::vector<std::pair<std::string, Tensor>> named_tensors(bool params, bool recurse, bool dedupe,
                                                            bool persistent_only = false) const;
  const Module& submodule_of(const std::string& target, std::string& leaf, const char* what) const;

  std::vector<Entry> params_, buffers_;
  std::vector<std::pair<std::string, ModulePtr>> children_;
  bool training_ = true;
};

std::ostream& operator<<(std::ostream& os, const Module& m);

}  // namespace coil::nn
