// ResNet (He et al., "Deep Residual Learning for Image Recognition") as torchvision builds it:
// the same modules, the same parameter names (conv1.weight, bn1.running_mean, layer2.0.
// downsample.0.weight, fc.bias, ...) and the same initialisation, so a torchvision checkpoint
// saved as safetensors loads with Module::load.
//
//   auto model = coil::nn::resnet50();           // random weights, 1000 classes
//   model->load("resnet50.safetensors");         // torchvision's state_dict
//   model->eval();
//   Tensor logits = coil::compile(model)(images);  // (N, 3, H, W) -> (N, 1000)
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <coil/nn/container.h>
#include <coil/nn/conv.h>
#include <coil/nn/linear.h>
#include <coil/nn/normalization.h>

namespace coil::nn {

struct ResNetOptions {
  int64_t num_classes = 1000;
  // The channels of the first stage (torchvision: 64); the stages have width, 2, 4 and 8 times
  // width (times the block's expansion at their outputs). Small widths make small test models.
  int64_t width = 64;
  DType dtype = kFloat32;
};

// Two 3x3 convolutions (the first with the stride) around batch norms, plus the shortcut:
// relu(bn2(conv2(relu(bn1(conv1(x))))) + downsample(x)). ResNet-18 and -34.
class BasicBlock : public Module {
 public:
  static constexpr int64_t kExpansion = 1;
  BasicBlock(int64_t in_planes, int64_t planes, int64_t stride, ModulePtr downsample, DType dtype);
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<Conv2d> conv1, conv2;
  std::shared_ptr<BatchNorm2d> bn1, bn2;
  ModulePtr downsample;  // nullptr: the identity
};

// 1x1 down to `planes`, 3x3 with the stride (torchvision's "v1.5"), 1x1 up to 4 * planes, each
// with its batch norm, plus the shortcut. ResNet-50, -101 and -152.
class Bottleneck : public Module {
 public:
  static constexpr int64_t kExpansion = 4;
  Bottleneck(int64_t in_planes, int64_t planes, int64_t stride, ModulePtr downsample, DType dtype);
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<Conv2d> conv1, conv2, conv3;
  std::shared_ptr<BatchNorm2d> bn1, bn2, bn3;
  ModulePtr downsample;
};

enum class ResNetBlock { basic, bottleneck };

// The stem (7x7 convolution with stride 2, batch norm, ReLU, 3x3 max pool with stride 2), four
// stages of blocks (layer1..layer4, strides 1, 2, 2, 2), global average pooling and fc.
// Input (N, 3, H, W) with H, W >= 32 in practice; output (N, num_classes) logits.
class ResNet : public Module {
 public:
  ResNet(ResNetBlock block, std::vector<int64_t> blocks_per_stage, ResNetOptions options = {});
  Tensor forward(const Tensor& images) override;

  ResNetBlock block;
  ResNetOptions options;
  std::shared_ptr<Conv2d> conv1;
  std::shared_ptr<BatchNorm2d> bn1;
  std::shared_ptr<Sequential> layer1, layer2, layer3, layer4;
  std::shared_ptr<Linear> fc;
};

std::shared_ptr<ResNet> resnet18(ResNetOptions options = {});   // basic blocks, [2, 2, 2, 2]
std::shared_ptr<ResNet> resnet34(ResNetOptions options = {});   // basic blocks, [3, 4, 6, 3]
std::shared_ptr<ResNet> resnet50(ResNetOptions options = {});   // bottlenecks, [3, 4, 6, 3]
std::shared_ptr<ResNet> resnet101(ResNetOptions options = {});  // bottlenecks, [3, 4, 23, 3]

}  // namespace coil::nn
