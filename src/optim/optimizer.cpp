// The optimizers' shared part: parameter groups, their checks, zero_grad and per-parameter
// state.
#include <coil/autograd.h>
#include <coil/optim.h>

#include <unordered_set>

namespace coil::optim {

void Optimizer::zero_grad(bool set_to_none) { autograd::zero_grad(parameters(), set_to_none); }

namespace detail {

template <typename Options, typename State>
OptimizerBase<Options, State>::OptimizerBase(const char* name,
                                             std::vector<ParamGroup<Options>> groups)
    : name_(name) {
  COIL_CHECK(!groups.empty(), "optim::", name_, ": got no parameter groups");
  for (auto& g : groups) add_param_group(std::move(g));
}

template <typename Options, typename State>
void OptimizerBase<Options, State>::add_param_group(ParamGroup<Options> group) {
  const size_t index = param_groups.size();
  COIL_CHECK(!group.params.empty(), "optim::", name_, ": parameter group ", index,
             " is empty; an optimizer needs parameters to optimize (did the module register "
             "any?)");
  std::unordered_set<const void*> seen;
  for (const auto& g : param_groups)
    for (const Tensor& p : g.params) seen.insert(p.impl());
  for (size_t i = 0; i < group.params.size(); ++i) {
    const Tensor& p = group.params[i];
    COIL_CHECK(p.defined(), "optim::", name_, ": parameter ", i, " of group ", index,
               " is undefined");
    COIL_CHECK(p.is_floating_point(), "optim::", name_, ": parameter ", i, " of group ", index,
               " has dtype ", dtype_name(p.dtype()), "; only floating-point tensors can be ",
               "optimized");
    COIL_CHECK(p.is_leaf(), "optim::", name_, ": parameter ", i, " of group ", index, " (sizes ",
               shape_str(p.sizes()), ") is not a leaf tensor (an op recorded it for autograd); ",
               "optimize the tensors that require grad, not results computed from them");
    COIL_CHECK(seen.insert(p.impl()).second, "optim::", name_, ": parameter ", i, " of group ",
               index, " (sizes ", shape_str(p.sizes()),
               ") appears more than once in the optimizer's parameters; pass each tensor once");
  }
  param_groups.push_back(std::move(group));
}

template <typename Options, typename State>
std::vector<Tensor> OptimizerBase<Options, State>::parameters() const {
  std::vector<Tensor> out;
  for (const auto& g : param_groups) out.insert(out.end(), g.params.begin(), g.params.end());
  return out;
}

template <typename Options, typename State>
double OptimizerBase<Options, State>::lr(size_t group) const {
  COIL_CHECK(group < param_groups.size(), "optim::", name_, ": no parameter group ", group,
             " (it has ", param_groups.size(), ")");
  return param_groups[group].options.lr;
}

template <typename Options, typename State>
void OptimizerBase<Options, State>::set_lr(double lr) {
  COIL_CHECK(lr >= 0, "optim::", name_, ": invalid learning rate ", lr, " (must be >= 0)");
  for (auto& g : param_groups) g.options.lr = lr;
}

template <typename Options, typename State>
const State* OptimizerBase<Options, State>::state(const Tensor& param) const {
  auto it = state_.find(param.impl());
  return it == state_.end() ? nullptr : &it->second;
}

template class OptimizerBase<SGDOptions, SGDState>;
template class OptimizerBase<AdamOptions, AdamState>;
template class OptimizerBase<AdamWOptions, AdamState>;

}  // namespace detail
}  // namespace coil::optim
