// ResNet as torchvision's resnet.py: the blocks, the stages and the initialisation.
#include <coil/nn/init.h>
#include <coil/nn/resnet.h>
#include <coil/ops.h>

namespace coil::nn {

namespace {

std::shared_ptr<Conv2d> conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, DType dtype) {
  return std::make_shared<Conv2d>(
      in, out, kernel,
      Conv2dOptions{.stride = {stride}, .padding = {kernel / 2}, .bias = false, .dtype = dtype});
}

std::shared_ptr<BatchNorm2d> norm(int64_t channels, DType dtype) {
  return std::make_shared<BatchNorm2d>(channels, BatchNormOptions{.dtype = dtype});
}

Tensor shortcut(const ModulePtr& downsample, const Tensor& x) {
  return downsample ? downsample->forward(x) : x;
}

}  // namespace

BasicBlock::BasicBlock(int64_t in_planes, int64_t planes, int64_t stride, ModulePtr ds, DType dt) {
  conv1 = register_module("conv1", conv(in_planes, planes, 3, stride, dt));
  bn1 = register_module("bn1", norm(planes, dt));
  conv2 = register_module("conv2", conv(planes, planes, 3, 1, dt));
  bn2 = register_module("bn2", norm(planes, dt));
  if (ds) downsample = register_module("downsample", ds);
}

Tensor BasicBlock::forward(const Tensor& x) {
  Tensor y = relu(bn1->forward(conv1->forward(x)));
  y = bn2->forward(conv2->forward(y));
  return relu(add(y, shortcut(downsample, x)));
}

Bottleneck::Bottleneck(int64_t in_planes, int64_t planes, int64_t stride, ModulePtr ds, DType dt) {
  conv1 = register_module("conv1", conv(in_planes, planes, 1, 1, dt));
  bn1 = register_module("bn1", norm(planes, dt));
  conv2 = register_module("conv2", conv(planes, planes, 3, stride, dt));
  bn2 = register_module("bn2", norm(planes, dt));
  conv3 = register_module("conv3", conv(planes, planes * kExpansion, 1, 1, dt));
  bn3 = register_module("bn3", norm(planes * kExpansion, dt));
  if (ds) downsample = register_module("downsample", ds);
}

Tensor Bottleneck::forward(const Tensor& x) {
  Tensor y = relu(bn1->forward(conv1->forward(x)));
  y = relu(bn2->forward(conv2->forward(y)));
  y = bn3->forward(conv3->forward(y));
  return relu(add(y, shortcut(downsample, x)));
}

ResNet::ResNet(ResNetBlock kind, std::vector<int64_t> blocks_per_stage, ResNetOptions o)
    : block(kind), options(o) {
  COIL_CHECK(blocks_per_stage.size() == 4, "nn::ResNet: expected blocks for 4 stages, got ",
             blocks_per_stage.size());
  COIL_CHECK(o.width > 0 && o.num_classes > 0, "nn::ResNet: width (", o.width,
             ") and num_classes (", o.num_classes, ") must be positive");
  const DType dt = o.dtype;
  const int64_t expansion =
      kind == ResNetBlock::basic ? BasicBlock::kExpansion : Bottleneck::kExpansion;
  conv1 = register_module(
      "conv1",
      std::make_shared<Conv2d>(
          3, o.width, 7, Conv2dOptions{.stride = {2}, .padding = {3}, .bias = false, .dtype = dt}));
  bn1 = register_module("bn1", norm(o.width, dt));
  int64_t in_planes = o.width;
  auto stage = [&](int64_t planes, int64_t blocks, int64_t stride) {
    auto seq = std::make_shared<Sequential>();
    for (int64_t i = 0; i < blocks; ++i) {
      const int64_t s = i == 0 ? stride : 1;
      ModulePtr ds;
      if (i == 0 && (s != 1 || in_planes != planes * expansion))
        ds = std::make_shared<Sequential>(conv(in_planes, planes * expansion, 1, s, dt),
                                          norm(planes * expansion, dt));
      if (kind == ResNetBlock::basic)
        seq->push_back(std::make_shared<BasicBlock>(in_planes, planes, s, ds, dt));
      else
        seq->push_back(std::make_shared<Bottleneck>(in_planes, planes, s, ds, dt));
      in_planes = planes * expansion;
    }
    return seq;
  };
  layer1 = register_module("layer1", stage(o.width, blocks_per_stage[0], 1));
  layer2 = register_module("layer2", stage(2 * o.width, blocks_per_stage[1], 2));
  layer3 = register_module("layer3", stage(4 * o.width, blocks_per_stage[2], 2));
  layer4 = register_module("layer4", stage(8 * o.width, blocks_per_stage[3], 2));
  fc = register_module("fc", std::make_shared<Linear>(in_planes, o.num_classes, true, dt));
  // torchvision's initialisation: convolutions kaiming-normal over fan_out for ReLU, batch norms
  // weight 1 and bias 0 (their defaults); fc keeps Linear's.
  for (auto& [name, m] : named_modules())
    if (auto* c = dynamic_cast<Conv2d*>(m)) init::kaiming_normal_(c->weight, 0, "fan_out", "relu");
}

Tensor ResNet::forward(const Tensor& images) {
  COIL_CHECK(images.dim() == 4 && images.size(1) == 3,
             "nn::ResNet: expected images of shape (N, 3, H, W), got ", shape_str(images.sizes()));
  Tensor x = relu(bn1->forward(conv1->forward(images)));
  x = max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
  for (const auto& stage : {layer1, layer2, layer3, layer4}) x = stage->forward(x);
  x = adaptive_avg_pool2d(x, {1, 1}).flatten(1);
  return fc->forward(x);
}

std::shared_ptr<ResNet> resnet18(ResNetOptions o) {
  return std::make_shared<ResNet>(ResNetBlock::basic, std::vector<int64_t>{2, 2, 2, 2}, o);
}
std::shared_ptr<ResNet> resnet34(ResNetOptions o) {
  return std::make_shared<ResNet>(ResNetBlock::basic, std::vector<int64_t>{3, 4, 6, 3}, o);
}
std::shared_ptr<ResNet> resnet50(ResNetOptions o) {
  return std::make_shared<ResNet>(ResNetBlock::bottleneck, std::vector<int64_t>{3, 4, 6, 3}, o);
}
std::shared_ptr<ResNet> resnet101(ResNetOptions o) {
  return std::make_shared<ResNet>(ResNetBlock::bottleneck, std::vector<int64_t>{3, 4, 23, 3}, o);
}

}  // namespace coil::nn
