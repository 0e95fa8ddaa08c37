// An optimizer's step as a compiled function (coil::compile): the optimizer lays out every
// tensor of the step — parameters, gradients, state, and the step's scalars as 0-dim tensors —
// in one list, and `update` applies the step to that list in place. Each parameter's update
// fuses into one loop and the loops into one combo kernel (schedule/horizontal.cpp).
#pragma once

#include <coil/optim.h>

#include <functional>
#include <map>
#include <string>
#include <tuple>
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

}  // namespace coil::optim::detail
