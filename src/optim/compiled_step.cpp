#include "optim/compiled_step.h"

#include <coil/compile.h>
#include <coil/ops.h>

namespace coil::optim::detail {

Tensor CompiledSteps::run(const std::string& name, const Update& update,
                          const std::vector<Tensor>& tensors) {
  auto& step = steps_[name];
  if (!step) {
    auto cf = coil::compile(update, CompileOptions{.name = name});
    step = [cf](const std::vector<Tensor>& all) { return cf(all); };
  }
  return step(tensors);
}

void assign(const Tensor& x, const Tensor& value, const Tensor& skip) {
  x.copy_(where(skip, x, value));
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
