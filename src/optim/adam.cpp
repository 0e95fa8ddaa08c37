// Adam and AdamW, as torch.optim.Adam / AdamW (the single-tensor form of torch/optim/adam.py,
// where AdamW is Adam with decoupled weight decay).
#include <coil/autograd.h>
#include <coil/ops.h>
#include <coil/optim.h>

#include "optim/compiled_step.h"

#include <algorithm>
#include <cmath>
#include <functional>
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

// One parameter's update, in place (torch/optim/adam.py's single-tensor form).
void adam_update(const Tensor& p, const Tensor& grad, const Tensor& m, const Tensor& v,
                 const Tensor& vmax, const StepScalars& k, const AdamOptions& o, bool decoupled) {
  const auto [beta1, beta2] = o.betas;
  Tensor g = o.maximize ? neg(grad) : grad;
  if (o.weight_decay != 0) {
    if (decoupled)
      p.mul_(k.decay);
    else
      g = g + p * o.weight_decay;
  }
  m.add_((g - m) * (1 - beta1));  // m.lerp_(g, 1 - beta1)
  v.mul_(beta2);
  v.add_(g * g * (1 - beta2));  // v.addcmul_(g, g, value=1 - beta2)
  Tensor second = v;
  if (o.amsgrad) {
    vmax.copy_(maximum(vmax, v));
    second = vmax;
  }
  Tensor denom = second.sqrt() / k.bias_correction2_sqrt + o.eps;
  p.add_(m / denom * -k.step_size);
}

// The compiled step's layout of `all`: per parameter p, g, m, v, [vmax,] then the three
// scalars of StepScalars.
void adam_update_all(const std::vector<Tensor>& all, const AdamOptions& o, bool decoupled) {
  const size_t per = o.amsgrad ? 8 : 7;
  for (size_t i = 0; i + per <= all.size(); i += per) {
    const Tensor* t = &all[i];
    const Tensor vmax = o.amsgrad ? t[4] : Tensor();
    const size_t k = o.amsgrad ? 5 : 4;
    adam_update(t[0], t[1], t[2], t[3], vmax, {t[k], t[k + 1], t[k + 2]}, o, decoupled);
  }
}

template <typename O>
void adam_step(std::vector<ParamGroup<O>>& groups,
               std::unordered_map<const void*, AdamState>& state, const char* name, bool decoupled,
               std::shared_ptr<detail::CompiledSteps>& compiled) {
  NoGradGuard no_grad;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const auto& group = groups[gi];
    check(group.options, name);
    std::vector<Tensor> params, grads, exp_avgs, exp_avg_sqs, max_sqs;
    std::vector<int64_t> steps;
    for (const Tensor& p : group.params) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      AdamState& s = state[p.impl()];
      if (s.step == 0) {  // lazily, as PyTorch: the state starts at the first step
        s.exp_avg = zeros_like(p);
        s.exp_avg_sq = zeros_like(p);
        if (group.options.amsgrad) s.max_exp_avg_sq = zeros_like(p);
      }
      if (group.options.amsgrad && !s.max_exp_avg_sq.defined())
        s.max_exp_avg_sq = zeros_like(p);  // amsgrad switched on between steps
      s.step += 1;
      params.push_back(p);
      grads.push_back(g);
      exp_avgs.push_back(s.exp_avg);
      exp_avg_sqs.push_back(s.exp_avg_sq);
      max_sqs.push_back(s.max_exp_avg_sq);
      steps.push_back(s.step);
    }
    const AdamOptions o = as_adam(group.options);
    if (!o.compiled || params.empty()) {
      functional::adam(params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps, o, decoupled);
      continue;
    }
    // Parameters at the same step, of one dtype and device, share their scalars: three small
    // tensors (on a GPU fills) rather than three per parameter, and only those whose value
    // changed since the last step are made again (CompiledSteps::scalar).
    struct Shared {
      int64_t step;
      DType dtype;
      Device device;
      StepScalars scalars;
    };
    if (!compiled) compiled = std::make_shared<detail::CompiledSteps>();
    std::vector<Shared> shared;
    std::vector<Tensor> all;
    for (size_t i = 0; i < params.size(); ++i) {
      all.insert(all.end(), {params[i], grads[i], exp_avgs[i], exp_avg_sqs[i]});
      if (o.amsgrad) all.push_back(max_sqs[i]);
      const Tensor& p = params[i];
      auto same = std::find_if(shared.begin(), shared.end(), [&](const Shared& s) {
        return s.step == steps[i] && s.dtype == p.dtype() && s.device == p.device();
      });
      if (same == shared.end()) {
        // Parameters at other steps (added to the group later) take the slots after these.
        const size_t first = 3 * shared.size();
        same = shared.insert(
            shared.end(),
            {steps[i], p.dtype(), p.device(), step_scalars(steps[i], o, [&](size_t k, double v) {
               return compiled->scalar(gi, first + k, v, p.dtype(), p.device());
             })});
      }
      const StepScalars& k = same->scalars;
      all.insert(all.end(), {k.step_size, k.bias_correction2_sqrt, k.decay});
    }
    compiled->run(
        gi, std::string(name) + "_step",
        [o, decoupled](const std::vector<Tensor>& t) { adam_update_all(t, o, decoupled); }, all);
  }
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

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : AdamW(one_group(std::move(params), options)) {}
AdamW::AdamW(std::vector<ParamGroup<AdamWOptions>> groups)
    : OptimizerBase("AdamW", std::move(groups)) {
  for (const auto& g : param_groups) check(g.options, "AdamW");
}
void AdamW::step() { adam_step(param_groups, state_, "AdamW", true, compiled_); }

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
