// Channels-last on the GPU (docs/memory_format.md): a ResNet converted to channels-last, fed
// channels-last images, keeps the layout through its convolutions (cuDNN's NHWC kernels), batch
// norms, pointwise ops and pools, eager and compiled, float32 and under autocast in bfloat16,
// with the CPU's NCHW values and gradients.
#include <map>

#include <coil/coil.h>
#include <coil/cuda.h>
#include <coil/nn/resnet.h>

#include "cuda_testing.h"
#include "memory_format_testing.h"
#include "testing.h"

using namespace coil;
using namespace coil::testing;

TEST(CudaChannelsLast, ResNetKeepsTheLayoutEagerAndCompiled) {
  COIL_REQUIRE_GPU();
  manual_seed(0);
  auto reference = nn::resnet18({.num_classes = 10, .width = 8});
  auto model = nn::resnet18({.num_classes = 10, .width = 8});
  model->load_state_dict(reference->state_dict());
  model->to(Device("cuda"));
  model->to(MemoryFormat::ChannelsLast);
  Tensor x = random({4, 3, 32, 32});
  Tensor xc = x.cuda().contiguous(MemoryFormat::ChannelsLast);
  auto stem = [&](const Tensor& t) { return relu(model->bn1->forward(model->conv1->forward(t))); };
  reference->eval();
  model->eval();
  {
    NoGradGuard no_grad;
    const Tensor want = reference->forward(x);
    expect_channels_last(stem(xc), "eager stem");
    expect_channels_last(compile(stem)(xc), "compiled stem");
    expect_near_largest(model->forward(xc), want, 1e-4, "eager forward");
    auto compiled = compile(model);
    expect_near_largest(compiled(xc), want, 1e-4, "compiled forward");
    // Under autocast the weights' casts keep their layout (torch's preserve_format).
    auto amp_stem = [&](const Tensor& t) {
      autocast guard(DeviceType::CUDA, kBFloat16);
      return stem(t);
    };
    expect_channels_last(amp_stem(xc), "eager stem under autocast");
    expect_channels_last(compile(amp_stem)(xc), "compiled stem under autocast");
    auto amp_forward = [&](const Tensor& t) {
      autocast guard(DeviceType::CUDA, kBFloat16);
      return model->forward(t);
    };
    expect_near_largest(compile(amp_forward)(xc).to(kFloat32), want, 5e-2,
                        "compiled forward under autocast");
  }
  reference->train();
  model->train();
  Tensor labels = randint(0, 10, {4});
  cross_entropy(reference->forward(x), labels).backward();
  auto loss = compile(
      [&](const Tensor& a, const Tensor& l) { return cross_entropy(model->forward(a), l); });
  loss(xc, labels.cuda()).backward();
  std::map<std::string, Tensor> want;
  for (const auto& [name, t] : reference->named_parameters()) want[name] = t;
  for (const auto& [name, t] : model->named_parameters()) {
    ASSERT_TRUE(t.grad().defined()) << name;
    if (t.suggest_memory_format() == MemoryFormat::ChannelsLast)  // not a 1x1 kernel's
      expect_channels_last(t.grad(), name + "'s gradient");
    EXPECT_LT(relative_difference(t.grad().cpu(), want.at(name).grad()), 1e-3) << name;
  }
}
