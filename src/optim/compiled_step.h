// An optimizer group's step as a compiled function (coil::compile): the optimizer lays out
// every tensor of the step — parameters, gradients, state, and the step's scalars as 0-dim
// tensors — in one list, and `update` applies the step to that list in place. Each parameter's
// update fuses into one loop and the loops into one combo kernel (schedule/horizontal.cpp).
#pragma once

#include <coil/optim.h>

#include <functional>
#include <string>
#include <vector>

namespace coil::optim::detail {

class CompiledSteps {
 public:
  using Update = std::function<void(const std::vector<Tensor>&)>;
  // Runs group `group`'s step on `tensors`, compiling `update` on the group's first step. The
  // options `update` captured are compiled in; what changes between steps (the learning rate,
  // bias corrections) must come as tensors in the list.
  void run(size_t group, const std::string& name, const Update& update,
           const std::vector<Tensor>& tensors);

 private:
  std::vector<std::function<void(const std::vector<Tensor>&)>> groups_;
};

}  // namespace coil::optim::detail
