// SGD, as torch.optim.SGD (the single-tensor form of torch/optim/sgd.py).
#include <algorithm>
#include <string>

#include <coil/autograd.h>
#include <coil/ops.h>
#include <coil/optim.h>

#include "optim/compiled_step.h"

namespace coil::optim {

namespace {
void check(const SGDOptions& o) {
  COIL_CHECK(o.lr >= 0, "optim::SGD: invalid learning rate ", o.lr, " (must be >= 0)");
  COIL_CHECK(o.momentum >= 0, "optim::SGD: invalid momentum ", o.momentum, " (must be >= 0)");
  COIL_CHECK(o.weight_decay >= 0, "optim::SGD: invalid weight_decay ", o.weight_decay,
             " (must be >= 0)");
  COIL_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
             "optim::SGD: Nesterov momentum requires a momentum > 0 and zero dampening, got ",
             "momentum=", o.momentum, ", dampening=", o.dampening);
}
std::vector<ParamGroup<SGDOptions>> one_group(std::vector<Tensor> params, SGDOptions o) {
  return {{std::move(params), o}};
}
}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : SGD(one_group(std::move(params), options)) {}

SGD::SGD(std::vector<ParamGroup<SGDOptions>> groups) : OptimizerBase("SGD", std::move(groups)) {
  for (const auto& g : param_groups) check(g.options);
}

namespace {

// The gradient the step follows: negated to maximize, with the L2 term.
Tensor effective_grad(const Tensor& p, const Tensor& grad, const SGDOptions& o) {
  Tensor g = o.maximize ? neg(grad) : grad;
  return o.weight_decay != 0 ? g + p * o.weight_decay : g;
}

// The direction the parameter moves in, given its momentum buffer (updated in place) or none.
Tensor direction(const Tensor& g, const Tensor& buf, const SGDOptions& o) {
  if (o.momentum == 0) return g;
  return o.nesterov ? g + buf * o.momentum : buf;
}

// A step of a parameter whose momentum buffer exists (or that has none: momentum 0), in place;
// `neg_lr` is -lr as a 0-dim tensor, so a compiled step sees a new learning rate.
void sgd_update(const Tensor& p, const Tensor& grad, const Tensor& buf, const Tensor& neg_lr,
                const SGDOptions& o) {
  Tensor g = effective_grad(p, grad, o);
  if (o.momentum != 0) {
    buf.mul_(o.momentum);
    buf.add_(o.dampening == 0 ? g : g * (1 - o.dampening));
  }
  p.add_(direction(g, buf, o) * neg_lr);
}

}  // namespace

void SGD::step() {
  NoGradGuard no_grad;
  for (size_t gi = 0; gi < param_groups.size(); ++gi) {
    const auto& group = param_groups[gi];
    const SGDOptions& o = group.options;
    check(o);
    std::vector<Tensor> params, grads, bufs;
    for (const Tensor& p : group.params) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      params.push_back(p);
      grads.push_back(g);
      bufs.push_back(state_[p.impl()].momentum_buffer);
    }
    bool buffers_ready = true;
    for (const Tensor& b : bufs) buffers_ready = buffers_ready && b.defined();
    if (o.compiled && !params.empty() && (o.momentum == 0 || buffers_ready)) {
      // Per parameter: p, g, [buf,] -lr; parameters of one dtype and device share their -lr (one
      // small tensor, on a GPU a fill, rather than one per parameter; made again only when the
      // learning rate changes: CompiledSteps::scalar).
      if (!compiled_) compiled_ = std::make_shared<detail::CompiledSteps>();
      std::vector<Tensor> all, steps;
      for (size_t i = 0; i < params.size(); ++i) {
        const Tensor& p = params[i];
        all.insert(all.end(), {p, grads[i]});
        if (o.momentum != 0) all.push_back(bufs[i]);
        auto same = std::find_if(steps.begin(), steps.end(), [&](const Tensor& s) {
          return s.dtype() == p.dtype() && s.device() == p.device();
        });
        if (same == steps.end())
          same = steps.insert(steps.end(),
                              compiled_->scalar(gi, steps.size(), -o.lr, p.dtype(), p.device()));
        all.push_back(*same);
      }
      compiled_->run(
          "SGD_step_group" + std::to_string(gi),
          [o](const std::vector<Tensor>& t) {
            const size_t per = o.momentum != 0 ? 4 : 3;
            for (size_t i = 0; i + per <= t.size(); i += per)
              sgd_update(t[i], t[i + 1], per == 4 ? t[i + 2] : Tensor(), t[i + per - 1], o);
            return t.back();
          },
          all);
      continue;
    }
    functional::sgd(params, grads, bufs, o);
    if (o.momentum != 0)
      for (size_t i = 0; i < params.size(); ++i) state_[params[i].impl()].momentum_buffer = bufs[i];
  }
}

void functional::sgd(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                     std::vector<Tensor>& momentum_buffers, const SGDOptions& o) {
  COIL_CHECK(grads.size() == params.size() && momentum_buffers.size() == params.size(),
             "optim::functional::sgd: expected as many gradients and momentum buffers as ",
             "parameters (", params.size(), "), got ", grads.size(), " and ",
             momentum_buffers.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    Tensor& buf = momentum_buffers[i];
    if (o.momentum != 0 && !buf.defined()) {
      // The first step: the buffer starts as the gradient itself (PyTorch's rule).
      Tensor g = effective_grad(p, grads[i], o);
      buf = g.clone();
      p.add_(direction(g, buf, o) * -o.lr);
      continue;
    }
    sgd_update(p, grads[i], buf, scalar_tensor(-o.lr, p.dtype(), p.device()), o);
  }
}

}  // namespace coil::optim
