// Adam and AdamW, as torch.optim.Adam / AdamW (the single-tensor form of torch/optim/adam.py,
// where AdamW is Adam with decoupled weight decay).
#include <coil/autograd.h>
#include <coil/ops.h>
#include <coil/optim.h>

#include "optim/compiled_step.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>

namespace coil::optim {

namespace {

template <typename O>
void check(const O& o, const char* name) {
  COIL_CHECK(o.lr >= 0, "optim::", name, ": invalid learning rate ", o.lr, " (must be >= 0)");
  COIL_CHECK(o.eps >= 0, "optim::", name, ": invalid eps ", o.eps, " (must be >= 0)");
  COIL_CHECK(o.betas.first >= 0 && o.betas.first < 1, "optim::", name, ": invalid beta1 ",
             o.betas.first, " (must be in [0, 1))");
  COIL_CHECK(o.betas.second >= 0 && o.betas.second < 1, "optim::", name, ": invalid beta2 ",
             o.betas.second, " (must be in [0, 1))");
  COIL_CHECK(o.weight_decay >= 0, "optim::", name, ": invalid weight_decay ", o.weight_decay,
             " (must be >= 0)");
}

AdamOptions as_adam(const AdamWOptions& o) {
  return {o.lr, o.betas, o.eps, o.weight_decay, o.amsgrad, o.maximize, o.compiled};
}
const AdamOptions& as_adam(const AdamOptions& o) { return o; }

// One step of every group: gathers the parameters that have gradients and their state.
// The step's per-parameter numbers (Adam's bias corrections), as tensors of the parameter's
// dtype: the update reads them like any input, so a compiled step takes new values without
// recompiling.
struct StepScalars {
  Tensor step_size, bias_correction2_sqrt, decay;
};
// Their values at step `step`, each made into a tensor by `make(slot, value)`.
template <typename Make>
StepScalars step_scalars(int64_t step, const AdamOptions& o, Make make) {
  const double n = static_cast<double>(step);
  const double bias_correction1 = 1 - std::pow(o.betas.first, n);
  return {make(0, o.lr / bias_correction1), make(1, std::sqrt(1 - std::pow(o.betas.second, n))),
          make(2, 1 - o.lr * o.weight_decay)};
}
StepScalars step_scalars(const Tensor& p, int64_t step, const AdamOptions& o) {
  return step_scalars(step, o,
                      [&p](size_t, double v) { return scalar_tensor(v, p.dtype(), p.device()); });
}

// x = value, or x as it is where `skip` (when defined) holds.
void assign_unless(const Tensor& x, const Tensor& value, const Tensor& skip) {
  if (skip.defined())
    detail::assign(x, value, skip);
  else
    x.copy_(value);
}

// One parameter's update, in place (torch/optim/adam.py's single-tensor form); with `skip`
// defined, only where it is false.
void adam_update(const Tensor& p, const Tensor& grad, const Tensor& m, const Tensor& v,
                 const Tensor& vmax, const StepScalars& k, const AdamOptions& o, bool decoupled,
                 const Tensor& skip = {}) {
  const auto [beta1, beta2] = o.betas;
  Tensor g = o.maximize ? neg(grad) : grad;
  Tensor from = p;
  if (o.weight_decay != 0) {
    if (decoupled)
      from = p * k.decay;
    else
      g = g + p * o.weight_decay;
  }
  const Tensor m_next = m + (g - m) * (1 - beta1);        // m.lerp_(g, 1 - beta1)
  const Tensor v_next = v * beta2 + g * g * (1 - beta2);  // v.mul_(beta2).addcmul_(g, g, 1 - beta2)
  Tensor second = v_next;
  if (o.amsgrad) {
    second = maximum(vmax, v_next);
    assign_unless(vmax, second, skip);
  }
  const Tensor denom = second.sqrt() / k.bias_correction2_sqrt + o.eps;
  assign_unless(m, m_next, skip);
  assign_unless(v, v_next, skip);
  assign_unless(p, from + m_next / denom * -k.step_size, skip);
}

// Per parameter p, g, m, v, [vmax,] then the three scalars of StepScalars: the compiled step's
// layout of a group's tensors.
size_t tensors_per_parameter(const AdamOptions& o) { return o.amsgrad ? 8 : 7; }

// The updates of `count` parameters laid out from `t`. With `inv_scale` defined, each gradient
// is first unscaled in place (times inv_scale), and the updates apply where `skip` is false.
void adam_update_all(const Tensor* t, size_t count, const AdamOptions& o, bool decoupled,
                     const Tensor& inv_scale = {}, const Tensor& skip = {}) {
  const size_t per = tensors_per_parameter(o), k = o.amsgrad ? 5 : 4;
  for (size_t i = 0; i < count; ++i, t += per) {
    Tensor g = t[1];
    if (inv_scale.defined()) {
      g = g * inv_scale;
      t[1].copy_(g);
    }
    adam_update(t[0], g, t[2], t[3], o.amsgrad ? t[4] : Tensor(), {t[k], t[k + 1], t[k + 2]}, o,
                decoupled, skip);
  }
}

// A group's step: the parameters that have gradients, their state advanced to this step.
struct GroupStep {
  AdamOptions options;
  std::vector<Tensor> params, grads, exp_avgs, exp_avg_sqs, max_sqs;
  std::vector<int64_t> steps;
  std::vector<AdamState*> states;
};

template <typename O>
GroupStep begin_step(const ParamGroup<O>& group,
                     std::unordered_map<const void*, AdamState>& state) {
  GroupStep gs{.options = as_adam(group.options)};
  for (const Tensor& p : group.params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    AdamState& s = state[p.impl()];
    if (s.step == 0) {  // lazily, as PyTorch: the state starts at the first step
      s.exp_avg = zeros_like(p);
      s.exp_avg_sq = zeros_like(p);
      if (gs.options.amsgrad) s.max_exp_avg_sq = zeros_like(p);
    }
    if (gs.options.amsgrad && !s.max_exp_avg_sq.defined())
      s.max_exp_avg_sq = zeros_like(p);  // amsgrad switched on between steps
    s.step += 1;
    gs.params.push_back(p);
    gs.grads.push_back(g);
    gs.exp_avgs.push_back(s.exp_avg);
    gs.exp_avg_sqs.push_back(s.exp_avg_sq);
    gs.max_sqs.push_back(s.max_exp_avg_sq);
    gs.steps.push_back(s.step);
    gs.states.push_back(&s);
  }
  return gs;
}

// The group's tensors in the compiled step's layout. Parameters at the same step, of one dtype
// and device, share their scalars: three small tensors (on a GPU fills) rather than three per
// parameter, and only those whose value changed since the last step are made again
// (CompiledSteps::scalar).
std::vector<Tensor> step_layout(const GroupStep& gs, size_t gi, detail::CompiledSteps& compiled) {
  struct Shared {
    int64_t step;
    DType dtype;
    Device device;
    StepScalars scalars;
  };
  const AdamOptions& o = gs.options;
  std::vector<Shared> shared;
  std::vector<Tensor> all;
  for (size_t i = 0; i < gs.params.size(); ++i) {
    all.insert(all.end(), {gs.params[i], gs.grads[i], gs.exp_avgs[i], gs.exp_avg_sqs[i]});
    if (o.amsgrad) all.push_back(gs.max_sqs[i]);
    const Tensor& p = gs.params[i];
    const int64_t step = gs.steps[i];
    auto same = std::find_if(shared.begin(), shared.end(), [&](const Shared& s) {
      return s.step == step && s.dtype == p.dtype() && s.device == p.device();
    });
    if (same == shared.end()) {
      // Parameters at other steps (added to the group later) take the slots after these.
      const size_t first = 3 * shared.size();
      same = shared.insert(
          shared.end(),
          {step, p.dtype(), p.device(), step_scalars(step, o, [&](size_t k, double v) {
             return compiled.scalar(gi, first + k, v, p.dtype(), p.device());
           })});
    }
    const StepScalars& k = same->scalars;
    all.insert(all.end(), {k.step_size, k.bias_correction2_sqrt, k.decay});
  }
  return all;
}

template <typename O>
void adam_step(std::vector<ParamGroup<O>>& groups,
               std::unordered_map<const void*, AdamState>& state, const char* name, bool decoupled,
               std::shared_ptr<detail::CompiledSteps>& compiled) {
  NoGradGuard no_grad;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    check(groups[gi].options, name);
    GroupStep gs = begin_step(groups[gi], state);
    const AdamOptions& o = gs.options;
    if (!o.compiled || gs.params.empty()) {
      functional::adam(gs.params, gs.grads, gs.exp_avgs, gs.exp_avg_sqs, gs.max_sqs, gs.steps, o,
                       decoupled);
      continue;
    }
    if (!compiled) compiled = std::make_shared<detail::CompiledSteps>();
    compiled->run(
        std::string(name) + "_step_group" + std::to_string(gi),
        [o, decoupled](const std::vector<Tensor>& t) {
          adam_update_all(t.data(), t.size() / tensors_per_parameter(o), o, decoupled);
          return t.back();
        },
        step_layout(gs, gi, *compiled));
  }
}

// The groups' step with the gradients unscaled, checked and applied in one compiled function
// (Optimizer::step_unscaling): the count of inf and NaN elements over every gradient of every
// group, the gradients times the inverse scale, and the updates where the count is 0. Nothing
// is done, and nothing returned, unless every group is compiled and every gradient is on one
// device.
template <typename O>
std::optional<bool> adam_step_unscaling(std::vector<ParamGroup<O>>& groups,
                                        std::unordered_map<const void*, AdamState>& state,
                                        const char* name, bool decoupled, double inv_scale,
                                        std::shared_ptr<detail::CompiledSteps>& compiled) {
  NoGradGuard no_grad;
  std::optional<Device> device;
  for (const auto& group : groups) {
    check(group.options, name);
    if (!group.options.compiled) return std::nullopt;
    for (const Tensor& p : group.params) {
      if (!p.grad().defined()) continue;
      if (device && !(*device == p.grad().device())) return std::nullopt;
      device = p.grad().device();
    }
  }
  if (!device) return std::nullopt;
  if (!compiled) compiled = std::make_shared<detail::CompiledSteps>();
  // The layout: every group's tensors in turn, then the inverse scale. The name says each
  // group's parameter count, which the update's captured layout depends on.
  std::vector<GroupStep> steps;
  std::vector<std::pair<AdamOptions, size_t>> layout;
  std::vector<Tensor> all;
  std::string key = std::string(name) + "_step_unscaling";
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    steps.push_back(begin_step(groups[gi], state));
    const std::vector<Tensor> t = step_layout(steps.back(), gi, *compiled);
    all.insert(all.end(), t.begin(), t.end());
    layout.emplace_back(steps.back().options, steps.back().params.size());
    key += "_" + std::to_string(steps.back().params.size());
  }
  all.push_back(compiled->scalar(groups.size(), 0, inv_scale, kFloat32, *device));
  const Tensor bad = compiled->run(
      key,
      [layout, decoupled](const std::vector<Tensor>& t) {
        return detail::unscaling_step(
            t, layout, [](const AdamOptions& o) { return tensors_per_parameter(o); },
            [decoupled](const Tensor* at, const AdamOptions& o, size_t count,
                        const Tensor& inv_scale, const Tensor& skip) {
              adam_update_all(at, count, o, decoupled, inv_scale, skip);
            });
      },
      all);
  const bool stepped = bad.item<int64_t>() == 0;
  if (!stepped)  // as PyTorch's fused step: the skipped step does not count
    for (const GroupStep& gs : steps)
      for (AdamState* s : gs.states) s->step -= 1;
  return stepped;
}

template <typename O>
std::vector<ParamGroup<O>> one_group(std::vector<Tensor> params, O o) {
  return {{std::move(params), o}};
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Adam(one_group(std::move(params), options)) {}
Adam::Adam(std::vector<ParamGroup<AdamOptions>> groups) : OptimizerBase("Adam", std::move(groups)) {
  for (const auto& g : param_groups) check(g.options, "Adam");
}
void Adam::step() { adam_step(param_groups, state_, "Adam", false, compiled_); }
std::optional<bool> Adam::step_unscaling(double inv_scale) {
  return adam_step_unscaling(param_groups, state_, "Adam", false, inv_scale, compiled_);
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : AdamW(one_group(std::move(params), options)) {}
AdamW::AdamW(std::vector<ParamGroup<AdamWOptions>> groups)
    : OptimizerBase("AdamW", std::move(groups)) {
  for (const auto& g : param_groups) check(g.options, "AdamW");
}
void AdamW::step() { adam_step(param_groups, state_, "AdamW", true, compiled_); }
std::optional<bool> AdamW::step_unscaling(double inv_scale) {
  return adam_step_unscaling(param_groups, state_, "AdamW", true, inv_scale, compiled_);
}

void functional::adam(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                      const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                      const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<int64_t>& steps,
                      const AdamOptions& o, bool decoupled) {
  const size_t n = params.size();
  COIL_CHECK(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n &&
                 steps.size() == n && (!o.amsgrad || max_exp_avg_sqs.size() == n),
             "optim::functional::adam: expected one gradient, exp_avg, exp_avg_sq, step (and ",
             "max_exp_avg_sq with amsgrad) per parameter (", n, ")");
  for (size_t i = 0; i < n; ++i) {
    COIL_CHECK(steps[i] >= 1, "optim::functional::adam: step numbers start at 1, got ", steps[i]);
    adam_update(params[i], grads[i], exp_avgs[i], exp_avg_sqs[i],
                o.amsgrad ? max_exp_avg_sqs[i] : Tensor(), step_scalars(params[i], steps[i], o), o,
                decoupled);
  }
}

}  // namespace coil::optim
