// SGD, as torch.optim.SGD (the single-tensor form of torch/optim/sgd.py).
#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

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
// `neg_lr` is -lr as a 0-dim tensor, so a compiled step sees a new learning rate. With `skip`
// defined, only where it is false.
void sgd_update(const Tensor& p, const Tensor& grad, const Tensor& buf, const Tensor& neg_lr,
                const SGDOptions& o, const Tensor& skip = {}) {
  Tensor g = effective_grad(p, grad, o);
  Tensor next = buf;  // the buffer after this step
  if (o.momentum != 0) {
    const Tensor add = o.dampening == 0 ? g : g * (1 - o.dampening);
    if (skip.defined())
      detail::assign(buf, next = buf * o.momentum + add, skip);
    else
      buf.mul_(o.momentum).add_(add);
  }
  const Tensor moved = direction(g, next, o) * neg_lr;
  if (skip.defined())
    detail::assign(p, p + moved, skip);
  else
    p.add_(moved);
}

// A group's parameters that have gradients, with their gradients and momentum buffers.
struct GroupStep {
  std::vector<Tensor> params, grads, bufs;
  bool buffers_ready() const {
    return std::all_of(bufs.begin(), bufs.end(), [](const Tensor& b) { return b.defined(); });
  }
};

GroupStep begin_step(const ParamGroup<SGDOptions>& group,
                     std::unordered_map<const void*, SGDState>& state) {
  GroupStep gs;
  for (const Tensor& p : group.params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    gs.params.push_back(p);
    gs.grads.push_back(g);
    gs.bufs.push_back(state[p.impl()].momentum_buffer);
  }
  return gs;
}

// Per parameter: p, g, [buf,] -lr: the compiled step's layout of a group's tensors. Parameters
// of one dtype and device share their -lr (one small tensor, on a GPU a fill, rather than one
// per parameter; made again only when the learning rate changes: CompiledSteps::scalar).
size_t tensors_per_parameter(const SGDOptions& o) { return o.momentum != 0 ? 4 : 3; }

std::vector<Tensor> step_layout(const GroupStep& gs, const SGDOptions& o, size_t gi,
                                detail::CompiledSteps& compiled) {
  std::vector<Tensor> all, steps;
  for (size_t i = 0; i < gs.params.size(); ++i) {
    const Tensor& p = gs.params[i];
    all.insert(all.end(), {p, gs.grads[i]});
    if (o.momentum != 0) all.push_back(gs.bufs[i]);
    auto same = std::find_if(steps.begin(), steps.end(), [&](const Tensor& s) {
      return s.dtype() == p.dtype() && s.device() == p.device();
    });
    if (same == steps.end())
      same = steps.insert(steps.end(),
                          compiled.scalar(gi, steps.size(), -o.lr, p.dtype(), p.device()));
    all.push_back(*same);
  }
  return all;
}

// The updates of `count` parameters laid out from `t`. With `inv_scale` defined, each gradient
// is first unscaled in place (times inv_scale), and the updates apply where `skip` is false.
void sgd_update_all(const Tensor* t, size_t count, const SGDOptions& o,
                    const Tensor& inv_scale = {}, const Tensor& skip = {}) {
  const size_t per = tensors_per_parameter(o);
  for (size_t i = 0; i < count; ++i, t += per) {
    Tensor g = t[1];
    if (inv_scale.defined()) {
      g = g * inv_scale;
      t[1].copy_(g);
    }
    sgd_update(t[0], g, per == 4 ? t[2] : Tensor(), t[per - 1], o, skip);
  }
}

}  // namespace

void SGD::step() {
  NoGradGuard no_grad;
  for (size_t gi = 0; gi < param_groups.size(); ++gi) {
    const SGDOptions& o = param_groups[gi].options;
    check(o);
    GroupStep gs = begin_step(param_groups[gi], state_);
    if (o.compiled && !gs.params.empty() && (o.momentum == 0 || gs.buffers_ready())) {
      if (!compiled_) compiled_ = std::make_shared<detail::CompiledSteps>();
      compiled_->run(
          "SGD_step_group" + std::to_string(gi),
          [o](const std::vector<Tensor>& t) {
            sgd_update_all(t.data(), t.size() / tensors_per_parameter(o), o);
            return t.back();
          },
          step_layout(gs, o, gi, *compiled_));
      continue;
    }
    functional::sgd(gs.params, gs.grads, gs.bufs, o);
    if (o.momentum != 0)
      for (size_t i = 0; i < gs.params.size(); ++i)
        state_[gs.params[i].impl()].momentum_buffer = gs.bufs[i];
  }
}

// The groups' step with the gradients unscaled, checked and applied in one compiled function
// (Optimizer::step_unscaling, as Adam's): the count of inf and NaN elements over every gradient
// of every group, the gradients times the inverse scale, and the updates where the count is 0.
// Nothing is done, and nothing returned, unless every group is compiled, every gradient is on
// one device and every momentum buffer exists (the first step with momentum makes them from the
// gradients: it unscales first).
std::optional<bool> SGD::step_unscaling(double inv_scale) {
  NoGradGuard no_grad;
  std::optional<Device> device;
  std::vector<GroupStep> steps;
  for (const auto& group : param_groups) {
    const SGDOptions& o = group.options;
    check(o);
    steps.push_back(begin_step(group, state_));
    if (!o.compiled || (o.momentum != 0 && !steps.back().buffers_ready())) return std::nullopt;
    for (const Tensor& g : steps.back().grads) {
      if (device && !(*device == g.device())) return std::nullopt;
      device = g.device();
    }
  }
  if (!device) return std::nullopt;
  if (!compiled_) compiled_ = std::make_shared<detail::CompiledSteps>();
  // The layout: every group's tensors in turn, then the inverse scale. The name says each
  // group's parameter count, which the update's captured layout depends on.
  std::vector<std::pair<SGDOptions, size_t>> layout;
  std::vector<Tensor> all;
  std::string key = "SGD_step_unscaling";
  for (size_t gi = 0; gi < steps.size(); ++gi) {
    const SGDOptions& o = param_groups[gi].options;
    const std::vector<Tensor> t = step_layout(steps[gi], o, gi, *compiled_);
    all.insert(all.end(), t.begin(), t.end());
    layout.emplace_back(o, steps[gi].params.size());
    key += "_" + std::to_string(steps[gi].params.size());
  }
  all.push_back(compiled_->scalar(steps.size(), 0, inv_scale, kFloat32, *device));
  const Tensor bad = compiled_->run(
      key,
      [layout](const std::vector<Tensor>& t) {
        return detail::unscaling_step(
            t, layout, [](const SGDOptions& o) { return tensors_per_parameter(o); },
            [](const Tensor* at, const SGDOptions& o, size_t count, const Tensor& inv_scale,
               const Tensor& skip) { sgd_update_all(at, count, o, inv_scale, skip); });
      },
      all);
  return bad.item<int64_t>() == 0;
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
