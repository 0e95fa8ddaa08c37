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

}  // namespace coil::optim::detail
