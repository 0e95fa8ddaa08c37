// Adam and AdamW, as torch.optim.Adam / AdamW (the single-tensor form of torch/optim/adam.py,
// where AdamW is Adam with decoupled weight decay).
#include <coil/autograd.h>
#include <coil/ops.h>
#include <coil/optim.h>

#include <cmath>

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
  return {o.lr, o.betas, o.eps, o.weight_decay, o.amsgrad, o.maximize};
}
const AdamOptions& as_adam(const AdamOptions& o) { return o; }

// One step of every group: gathers the parameters that have gradients and their state.
template <typename O>
void adam_step(std::vector<ParamGroup<O>>& groups,
               std::unordered_map<const void*, AdamState>& state, const char* name,
               bool decoupled) {
  NoGradGuard no_grad;
  for (const auto& group : groups) {
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
    functional::adam(params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps, as_adam(group.options),
                     decoupled);
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
void Adam::step() { adam_step(param_groups, state_, "Adam", false); }

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : AdamW(one_group(std::move(params), options)) {}
AdamW::AdamW(std::vector<ParamGroup<AdamWOptions>> groups)
    : OptimizerBase("AdamW", std::move(groups)) {
  for (const auto& g : param_groups) check(g.options, "AdamW");
}
void AdamW::step() { adam_step(param_groups, state_, "AdamW", true); }

void functional::adam(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                      const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                      const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<int64_t>& steps,
                      const AdamOptions& o, bool decoupled) {
  const size_t n = params.size();
  COIL_CHECK(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n &&
                 steps.size() == n && (!o.amsgrad || max_exp_avg_sqs.size() == n),
             "optim::functional::adam: expected one gradient, exp_avg, exp_avg_sq, step (and ",
             "max_exp_avg_sq with amsgrad) per parameter (", n, ")");
  const auto [beta1, beta2] = o.betas;
  for (size_t i = 0; i < n; ++i) {
    const Tensor& p = params[i];
    const Tensor &m = exp_avgs[i], &v = exp_avg_sqs[i];
    COIL_CHECK(steps[i] >= 1, "optim::functional::adam: step numbers start at 1, got ", steps[i]);
    Tensor g = o.maximize ? neg(grads[i]) : grads[i];
    if (o.weight_decay != 0) {
      if (decoupled)
        p.mul_(1 - o.lr * o.weight_decay);
      else
        g = g + p * o.weight_decay;
    }
    m.add_((g - m) * (1 - beta1));  // m.lerp_(g, 1 - beta1)
    v.mul_(beta2);
    v.add_(g * g * (1 - beta2));  // v.addcmul_(g, g, value=1 - beta2)
    const double step = static_cast<double>(steps[i]);
    const double bias_correction1 = 1 - std::pow(beta1, step);
    const double bias_correction2_sqrt = std::sqrt(1 - std::pow(beta2, step));
    const double step_size = o.lr / bias_correction1;
    Tensor second = v;
    if (o.amsgrad) {
      const Tensor& vmax = max_exp_avg_sqs[i];
      vmax.copy_(maximum(vmax, v));
      second = vmax;
    }
    Tensor denom = second.sqrt() / bias_correction2_sqrt + o.eps;
    p.add_(m / denom * -step_size);
  }
}

}  // namespace coil::optim
