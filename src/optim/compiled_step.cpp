#include "optim/compiled_step.h"

#include <coil/compile.h>

namespace coil::optim::detail {

void CompiledSteps::run(size_t group, const std::string& name, const Update& update,
                        const std::vector<Tensor>& tensors) {
  if (groups_.size() <= group) groups_.resize(group + 1);
  if (!groups_[group]) {
    // A compiled function returns something; the step's results are its in-place updates.
    auto step = [update](const std::vector<Tensor>& all) {
      update(all);
      return all.back();
    };
    auto cf = coil::compile(step, CompileOptions{.name = name + "_group" + std::to_string(group)});
    groups_[group] = [cf](const std::vector<Tensor>& all) { cf(all); };
  }
  groups_[group](tensors);
}

Tensor CompiledSteps::scalar(size_t group, size_t slot, double value, DType dtype,
                             const Device& device) {
  // float32's rounding decides most steps' sameness; other dtypes compare the exact number.
  const double stored = dtype == kFloat32 ? static_cast<double>(static_cast<float>(value)) : value;
  Made& made = scalars_[{group, slot, dtype, device.str()}];
  if (!made.tensor.defined() || made.stored != stored)
    made = {stored, scalar_tensor(value, dtype, device)};
  return made.tensor;
}

}  // namespace coil::optim::detail
