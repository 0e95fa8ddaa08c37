// Batch norm in training mode on the GPU, eagerly: the output, the running statistics it
// updates and the gradients match the CPU's, NCHW and channels-last, and nothing runs on the
// CPU instead (the op's eager kernel is the CPU's: on a GPU the update is made of GPU ops).
#include <coil/coil.h>
#include <coil/cuda.h>

#include "cuda_testing.h"
#include "testing.h"

using namespace coil;
using namespace coil::testing;

TEST(CudaBatchNorm, TrainingUpdatesTheRunningStatisticsOnTheGpu) {
  COIL_REQUIRE_GPU();
  for (MemoryFormat format : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
    SCOPED_TRACE(format == MemoryFormat::Contiguous ? "NCHW" : "channels-last");
    Tensor x = random({6, 5, 7, 9}).contiguous(format), g = random({6, 5, 7, 9});
    auto run = [&](Device device) {
      nn::BatchNorm2d bn(5, nn::BatchNormOptions{.momentum = 0.3});
      bn.to(device);
      bn.train();
      Tensor xd = x.detach().to(device).requires_grad_();
      Tensor y;
      for (int step = 0; step < 2; ++step) y = bn.forward(xd);  // two updates of the statistics
      (y * g.to(device)).sum().backward();
      return std::vector<Tensor>{y,         bn.running_mean,  bn.running_var,
                                 xd.grad(), bn.weight.grad(), bn.bias.grad()};
    };
    std::vector<Tensor> want = run(kCPU);
    std::vector<Tensor> got;
    const std::string log = log_of("device_eager", [&] { got = run(kCUDA); });
    EXPECT_EQ(log.find("runs on the CPU"), std::string::npos) << log;
    const char* names[] = {"output", "running mean", "running var",
                           "x grad", "weight grad",  "bias grad"};
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(got[i].device(), kCUDA) << names[i];
      EXPECT_EQ(got[i].strides(), want[i].strides()) << names[i];
      expect_same(got[i], want[i], names[i], 1e-4);
    }
  }
}
