// Containers: nn::Sequential (a chain) and nn::ModuleList (a list), as their torch.nn
// namesakes. Their children are named "0", "1", ... unless given names.
//
//   auto mlp = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 8),
//                                               std::make_shared<nn::ReLU>(),
//                                               std::make_shared<nn::Linear>(8, 2));
//   Tensor y = mlp->forward(x);   // parameters "0.weight", "0.bias", "2.weight", "2.bias"
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <coil/nn/module.h>

namespace coil::nn {

// Shared by Sequential and ModuleList: an indexed list of children.
class ModuleSequence : public Module {
 public:
  // Appends a module named by its position ("3"), or by `name`.
  void push_back(ModulePtr module);
  void push_back(const std::string& name, ModulePtr module);
  void extend(const std::vector<ModulePtr>& modules);
  size_t size() const { return named_children().size(); }
  bool empty() const { return size() == 0; }
  // The i-th module (negative i counts from the end); out of range is a coil::Error.
  ModulePtr operator[](int64_t i) const;
  // The i-th module as an M; a module of another type is a coil::Error naming both.
  template <typename M>
  std::shared_ptr<M> at(int64_t i) const {
    ModulePtr m = (*this)[i];
    auto typed = std::dynamic_pointer_cast<M>(m);
    if (!typed) wrong_type(i, *m);
    return typed;
  }
  std::vector<ModulePtr>::const_iterator begin() const { return list_.begin(); }
  std::vector<ModulePtr>::const_iterator end() const { return list_.end(); }

 private:
  [[noreturn]] void wrong_type(int64_t i, const Module& m) const;
  std::vector<ModulePtr> list_;
};

// Calls its modules in order, each on the previous one's output (an empty Sequential returns
// its input).
class Sequential : public ModuleSequence {
 public:
  Sequential() = default;
  template <typename... Ms>
  explicit Sequential(std::shared_ptr<Ms>... modules) {
    (push_back(ModulePtr(std::move(modules))), ...);
  }
  explicit Sequential(const std::vector<ModulePtr>& modules) { extend(modules); }
  // Named children, as Sequential(OrderedDict(...)).
  explicit Sequential(const std::vector<std::pair<std::string, ModulePtr>>& named) {
    for (const auto& [n, m] : named) push_back(n, m);
  }
  Tensor forward(const Tensor& input) override;
};

// Holds modules so that their parameters are registered; it has no forward: iterate over it.
class ModuleList : public ModuleSequence {
 public:
  ModuleList() = default;
  template <typename... Ms>
  explicit ModuleList(std::shared_ptr<Ms>... modules) {
    (push_back(ModulePtr(std::move(modules))), ...);
  }
  explicit ModuleList(const std::vector<ModulePtr>& modules) { extend(modules); }
  Tensor forward(const Tensor& input) override;
};

}  // namespace coil::nn
