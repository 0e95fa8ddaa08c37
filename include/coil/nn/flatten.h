// nn::Flatten, as torch.nn.Flatten: merges dims start_dim..end_dim into one.
#pragma once

#include <cstdint>

#include <coil/nn/module.h>

namespace coil::nn {

class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& input) override { return input.flatten(start_dim, end_dim); }
  std::string extra_repr() const override;
  int64_t start_dim, end_dim;
};

}  // namespace coil::nn
