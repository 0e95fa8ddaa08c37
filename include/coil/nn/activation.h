// Activation modules: nn::ReLU, nn::GELU, nn::SiLU, nn::Tanh, nn::Sigmoid.
#pragma once

#include <string>

#include <coil/nn/module.h>

namespace coil::nn {

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& input) override;
};

// approximate: "none" (the exact erf form) or "tanh".
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  std::string approximate;
};

// x * sigmoid(x).
class SiLU : public Module {
 public:
  Tensor forward(const Tensor& input) override;
};

class Tanh : public Module {
 public:
  Tensor forward(const Tensor& input) override;
};

class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& input) override;
};

}  // namespace coil::nn
