// An optimizer's step as a compiled function (coil::compile): the optimizer lays out every
// tensor of the step — parameters, gradients, state, and the step's scalars as 0-dim tensors —
// in one list, and `update` applies the step to that list in place. Each parameter's update
// fuses into one loop and the loops into one combo kernel (schedule/horizontal.cpp).
#pragma once

#include <coil/ops.h>
#include <coil/optim.h>

#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace coil::optim::detail {

class CompiledSteps {
 public:
  // Applies a step to the list in place, and returns one tensor (a compiled function returns
  // something): the list's last tensor, or what the step computed (the count of inf and NaN
  // gradient elements of a step that unscales, optim/adam.cpp).
  using Update = std::function<Tensor(const std::vector<Tensor>&)>;
  // Runs the step named `name` on `tensors`, compiling `update` the first time that name runs.
  // The options `update` captured are compiled in, so the name must say everything that
  // changes them (the group, the layout); what changes between steps (the learning rate, bias
  // corrections) must come as tensors in the list.
  Tensor run(const std::string& name, const Update& update, const std::vector<Tensor>& tensors);

  // The 0-dim tensor of `value` for scalar `slot` of group `group`'s step, on `dtype` and
  // `device`: the one made for the last step while it holds the same number in that dtype. A
  // scalar that did not change (a learning rate, Adam's bias corrections once they round to
  // their limit) is not made again: on a GPU each is a fill launched every step.
  Tensor scalar(size_t group, size_t slot, double value, DType dtype, const Device& device);

 private:
  std::map<std::string, std::function<Tensor(const std::vector<Tensor>&)>> steps_;
  struct Made {
    double stored;  // the value as the tensor holds it
    Tensor tensor;
  };
  std::map<std::tuple<size_t, size_t, DType, std::string>, Made> scalars_;
};

// x = value, or x as it is where `skip` (a 0-dim bool) holds: a step skipped for an inf or
// NaN gradient leaves every tensor it would have written.
void assign(const Tensor& x, const Tensor& value, const Tensor& skip);

// The body of a step that unscales (Optimizer::step_unscaling) over `t`: the groups' tensors in
// turn, each group `count` parameters of `per` tensors with the gradient second, then the
// inverse scale. Counts the inf and NaN elements of every gradient, then runs
// `update(first tensor, group, count, inv_scale, skip)` for each group, `skip` true where the
// count is not 0; returns the count.
template <typename Group, typename Per, typename Update>
Tensor unscaling_step(const std::vector<Tensor>& t,
                      const std::vector<std::pair<Group, size_t>>& layout, Per per, Update update) {
  Tensor bad = zeros({}, kInt64, t.back().device());
  const Tensor* at = t.data();
  for (const auto& [o, count] : layout)
    for (size_t i = 0; i < count; ++i, at += per(o))
      bad = bad + logical_or(isnan(at[1]), isinf(at[1])).sum();
  const Tensor skip = bad > 0;
  at = t.data();
  for (const auto& [o, count] : layout) {
    update(at, o, count, t.back(), skip);
    at += count * per(o);
  }
  return bad;
}

}  // namespace coil::optim::detail
