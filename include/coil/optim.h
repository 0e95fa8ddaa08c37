// coil::optim: SGD, Adam and AdamW, with PyTorch's update formulas.
//
//   auto model = std::make_shared<nn::Linear>(4, 2);
//   optim::AdamW opt(model->parameters(), {.lr = 1e-3});
//   for (...) {
//     opt.zero_grad();
//     Tensor loss = coil::mse_loss(model->forward(x), y);
//     loss.backward();
//     opt.step();
//   }
//
// step() updates each parameter that has a gradient, in place under NoGradGuard (parameters
// without one are skipped, as in PyTorch). Options are per parameter group and can be changed
// between steps (opt.param_groups[0].options.lr = 1e-4), as PyTorch's param_groups.
// The updates themselves are the free functions in optim::functional, which work on lists of
// tensors (PyTorch's torch.optim._functional, the "foreach" form).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include <coil/tensor.h>

namespace coil::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;  // needs momentum > 0 and dampening == 0
  bool maximize = false;  // ascend instead of descend
  // The step as one compiled function, as AdamOptions::compiled (the first step with momentum,
  // which creates the momentum buffers, runs eagerly).
  bool compiled = false;
};

struct AdamOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0;  // L2: added to the gradient
  bool amsgrad = false;
  bool maximize = false;
  // The step as one compiled function (coil::compile over the lists of parameters, gradients
  // and state): each parameter's update fuses into one loop, and every loop runs in one
  // combo kernel (torch's fused / foreach optimizers). The learning rate may change between
  // steps; the other options are compiled in.
  bool compiled = false;
};

struct AdamWOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;  // decoupled: param *= 1 - lr * weight_decay
  bool amsgrad = false;
  bool maximize = false;
  bool compiled = false;  // as AdamOptions::compiled
};

template <typename Options>
struct ParamGroup {
  std::vector<Tensor> params;
  Options options;
};

// The optimizers' common interface.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update of every parameter that has a gradient.
  virtual void step() = 0;
  // A step of gradients that are `1 / inv_scale` times too large (a scaled loss's,
  // amp::GradScaler): the gradients times inv_scale in place, checked for inf and NaN, and the
  // update applied unless one is, in one compiled function with no host round trip in between
  // (as the grad_scale and found_inf of PyTorch's fused optimizers). Returns whether it
  // stepped; or nothing, having done nothing, where the optimizer has no such step (Adam and
  // AdamW have it when compiled, with every gradient on one device).
  virtual std::optional<bool> step_unscaling(double inv_scale) {
    (void)inv_scale;
    return std::nullopt;
  }
  // Clears the parameters' gradients (set_to_none, the default as in PyTorch 2) or zeroes them.
  void zero_grad(bool set_to_none = true);
  // Every parameter of every group.
  virtual std::vector<Tensor> parameters() const = 0;
  // The learning rate of a group; set_lr sets every group's (what a scheduler does).
  virtual double lr(size_t group = 0) const = 0;
  virtual void set_lr(double lr) = 0;
};

// Per-parameter state.
struct SGDState {
  Tensor momentum_buffer;  // undefined until the first step with momentum
};
struct AdamState {
  int64_t step = 0;
  Tensor exp_avg, exp_avg_sq;
  Tensor max_exp_avg_sq;  // amsgrad only
};

namespace detail {
class CompiledSteps;  // a group's step compiled by coil::compile (src/optim/compiled_step.h)

// Parameter groups with options, checked once at construction and again at each step (options
// can change between steps).
template <typename Options, typename State>
class OptimizerBase : public Optimizer {
 public:
  std::vector<ParamGroup<Options>> param_groups;

  void add_param_group(ParamGroup<Options> group);
  std::vector<Tensor> parameters() const override;
  double lr(size_t group = 0) const override;
  void set_lr(double lr) override;
  // The state of a parameter of this optimizer (nullptr before its first step).
  const State* state(const Tensor& param) const;

 protected:
  OptimizerBase(const char* name, std::vector<ParamGroup<Options>> groups);
  const char* name_;
  std::unordered_map<const void*, State> state_;  // keyed by the parameter's TensorImpl
};
}  // namespace detail

// Stochastic gradient descent with momentum (PyTorch's formulation: the learning rate scales the
// momentum buffer, not each gradient), dampening, weight decay and Nesterov momentum.
class SGD : public detail::OptimizerBase<SGDOptions, SGDState> {
 public:
  explicit SGD(std::vector<Tensor> params, SGDOptions options = {});
  explicit SGD(std::vector<ParamGroup<SGDOptions>> groups);
  void step() override;
  std::optional<bool> step_unscaling(double inv_scale) override;

 private:
  std::shared_ptr<detail::CompiledSteps> compiled_;
};

// Adam (Kingma & Ba) with bias correction; weight_decay is an L2 term added to the gradient.
class Adam : public detail::OptimizerBase<AdamOptions, AdamState> {
 public:
  explicit Adam(std::vector<Tensor> params, AdamOptions options = {});
  explicit Adam(std::vector<ParamGroup<AdamOptions>> groups);
  void step() override;
  std::optional<bool> step_unscaling(double inv_scale) override;

 private:
  std::shared_ptr<detail::CompiledSteps> compiled_;
};

// AdamW (Loshchilov & Hutter): Adam with decoupled weight decay.
class AdamW : public detail::OptimizerBase<AdamWOptions, AdamState> {
 public:
  explicit AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  explicit AdamW(std::vector<ParamGroup<AdamWOptions>> groups);
  void step() override;
  std::optional<bool> step_unscaling(double inv_scale) override;

 private:
  std::shared_ptr<detail::CompiledSteps> compiled_;
};

// The updates on lists of tensors, in place. The caller runs them under NoGradGuard (the
// optimizers do); they are ordinary coil ops, so a compiled function can capture them.
namespace functional {

// momentum_buffers[i] undefined: created from the gradient on this step (as PyTorch's first
// step); the vector is updated.
void sgd(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
         std::vector<Tensor>& momentum_buffers, const SGDOptions& options);

// steps[i] is the step number after this update (1 on the first). max_exp_avg_sqs is used
// with amsgrad only. decoupled_weight_decay: AdamW's param *= 1 - lr * weight_decay instead of
// Adam's grad += weight_decay * param.
void adam(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
          const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
          const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<int64_t>& steps,
          const AdamOptions& options, bool decoupled_weight_decay);

}  // namespace functional

}  // namespace coil::optim
