// nn::Identity and nn::Linear, as torch.nn.Identity / torch.nn.Linear.
#pragma once

#include <cstdint>

#include <coil/nn/module.h>

namespace coil::nn {

// Returns its input.
class Identity : public Module {
 public:
  Tensor forward(const Tensor& input) override { return input; }
};

// y = x @ weight^T + bias, over the last dim of x.
// weight: [out_features, in_features], kaiming-uniform (a=sqrt(5)), i.e.
// U(-1/sqrt(in_features), 1/sqrt(in_features)); bias: [out_features], the same range.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, DType dtype = kFloat32);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  int64_t in_features, out_features;
  Tensor weight, bias;  // bias is undefined when constructed with bias=false
};

}  // namespace coil::nn
