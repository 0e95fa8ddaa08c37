// SGD, as torch.optim.SGD (the single-tensor form of torch/optim/sgd.py).
#include <coil/autograd.h>
#include <coil/ops.h>
#include <coil/optim.h>

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

void SGD::step() {
  NoGradGuard no_grad;
  for (const auto& group : param_groups) {
    check(group.options);
    std::vector<Tensor> params, grads, bufs;
    for (const Tensor& p : group.params) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      params.push_back(p);
      grads.push_back(g);
      bufs.push_back(state_[p.impl()].momentum_buffer);
    }
    functional::sgd(params, grads, bufs, group.options);
    if (group.options.momentum != 0)
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
    Tensor g = o.maximize ? neg(grads[i]) : grads[i];
    if (o.weight_decay != 0) g = g + p * o.weight_decay;
    if (o.momentum != 0) {
      Tensor& buf = momentum_buffers[i];
      if (!buf.defined()) {
        buf = g.clone();
      } else {
        buf.mul_(o.momentum);
        buf.add_(o.dampening == 0 ? g : g * (1 - o.dampening));
      }
      g = o.nesterov ? g + buf * o.momentum : buf;
    }
    p.add_(g * -o.lr);
  }
}

}  // namespace coil::optim
