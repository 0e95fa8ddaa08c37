// nn::Dropout, as torch.nn.Dropout.
#pragma once

#include <coil/nn/module.h>

namespace coil::nn {

// Training: zeroes each element with probability p and scales the rest by 1 / (1 - p), from
// coil's default random generator. Evaluation: the identity.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  double p;
};

}  // namespace coil::nn
