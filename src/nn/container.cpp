#include <coil/nn/container.h>

namespace coil::nn {

void ModuleSequence::push_back(ModulePtr module) {
  push_back(std::to_string(size()), std::move(module));
}

void ModuleSequence::push_back(const std::string& name, ModulePtr module) {
  add_module(name, module);
  list_.push_back(std::move(module));
}

void ModuleSequence::extend(const std::vector<ModulePtr>& modules) {
  for (const ModulePtr& m : modules) push_back(m);
}

ModulePtr ModuleSequence::operator[](int64_t i) const {
  const int64_t n = static_cast<int64_t>(list_.size());
  COIL_CHECK(i >= -n && i < n, "nn::", name(), ": index ", i, " is out of range for ", n, " module",
             n == 1 ? "" : "s");
  return list_[static_cast<size_t>(i < 0 ? i + n : i)];
}

void ModuleSequence::wrong_type(int64_t i, const Module& m) const {
  throw Error(detail::str_cat("nn::", name(), ": module ", i, " is a ", m.name(),
                              ", not the type asked for"));
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (const ModulePtr& m : *this) x = m->forward(x);
  return x;
}

Tensor ModuleList::forward(const Tensor&) {
  throw Error(
      "nn::ModuleList has no forward: iterate over it (for (auto& m : *list)) and call each "
      "module, or use nn::Sequential to chain them");
}

}  // namespace coil::nn
