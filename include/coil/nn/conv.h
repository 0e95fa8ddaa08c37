// nn::Conv2d, as torch.nn.Conv2d (zero padding).
#pragma once

#include <cstdint>

#include <coil/nn/module.h>

namespace coil::nn {

// stride, padding and dilation take one value for both spatial dims ({2}) or two ({2, 1}).
struct Conv2dOptions {
  Shape stride = {1, 1};
  Shape padding = {0, 0};
  Shape dilation = {1, 1};
  int64_t groups = 1;
  bool bias = true;
  DType dtype = kFloat32;
};

// Input (N, C_in, H, W) or unbatched (C_in, H, W) -> (N, C_out, H_out, W_out).
// weight: [out_channels, in_channels / groups, kH, kW], kaiming-uniform (a=sqrt(5)); bias:
// [out_channels], U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in_channels / groups * kH * kW.
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Shape kernel_size, Conv2dOptions options = {});
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, Conv2dOptions options = {})
      : Conv2d(in_channels, out_channels, Shape{kernel_size, kernel_size}, std::move(options)) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  int64_t in_channels, out_channels;
  Shape kernel_size, stride, padding, dilation;
  int64_t groups;
  Tensor weight, bias;
};

}  // namespace coil::nn
