// Max pooling compiled for the GPU is a generated kernel (lower/pool.cpp), fused with the ReLU
// before it and written in its input's layout: every window (padding, dilation, ceil_mode,
// unbatched), NCHW and channels-last, float32 and bf16, NaN and -inf inputs, against the eager
// kernel exactly (a maximum rounds nothing); and its gradient, generated too, against the eager
// kernel's exactly, ties and NaN included.
#include <gtest/gtest.h>

#include <coil/coil.h>

#include <limits>

#include "cuda_testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

std::string str(const Shape& s) {
  std::string r;
  for (int64_t v : s) r += (r.empty() ? "" : "x") + std::to_string(v);
  return r;
}

struct Window {
  Shape kernel, stride, padding, dilation;
  bool ceil;
};

TEST(CudaMaxPool, CompiledIsAGeneratedKernelEqualToEager) {
  COIL_REQUIRE_GPU();
  compiler_reset();
  const std::vector<Window> windows = {{{2, 2}, {}, {0, 0}, {1, 1}, false},
                                       {{3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
                                       {{3, 2}, {1, 1}, {1, 1}, {2, 3}, false},
                                       {{3, 3}, {2, 2}, {0, 0}, {1, 1}, true}};
  const float inf = std::numeric_limits<float>::infinity();
  for (const Window& w : windows)
    for (DType dt : {kFloat32, kBFloat16})
      for (bool channels_last : {false, true})
        for (const Shape& s : {Shape{2, 16, 13, 11}, Shape{16, 9, 8}}) {
          if (channels_last && s.size() != 4) continue;
          SCOPED_TRACE(str(s) + " " + " " + dtype_name(dt) + (channels_last ? " NHWC" : "") +
                       " kernel " + str(w.kernel));
          Tensor x = random(s, kFloat32, -2, 2);
          x.view({-1}).narrow(0, 5, 1).fill_(std::nanf(""));
          x.view({-1}).narrow(0, 40, 3).fill_(-inf);
          x = x.to(dt).cuda();
          if (channels_last) x = x.contiguous(MemoryFormat::ChannelsLast);
          auto pool = [&](const Tensor& t) {
            return max_pool2d(relu(t), w.kernel, w.stride, w.padding, w.dilation, w.ceil);
          };
          Tensor got;
          const std::string log = log_of("output_code", [&] { got = compile(pool)(x); });
          EXPECT_EQ(log.find("extern max_pool2d"), std::string::npos) << log;
          const Tensor want = pool(x);
          EXPECT_EQ(got.strides(), want.strides());
          EXPECT_TRUE(allclose(got.cpu(), want.cpu(), 0, 0, /*equal_nan=*/true));
        }
}

// The same windows, on whole numbers (ties in most windows, the first tap winning) with NaN
// (the first NaN winning) and -inf: the gradient each element gets, summed over the windows it
// wins in the same order, equals the eager kernel's; dilated windows keep the eager kernel.
TEST(CudaMaxPool, CompiledBackwardIsAGeneratedKernelEqualToEager) {
  COIL_REQUIRE_GPU();
  compiler_reset();
  const std::vector<Window> windows = {
      {{2, 2}, {}, {0, 0}, {1, 1}, false},     {{3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
      {{3, 2}, {1, 1}, {1, 1}, {1, 1}, false}, {{3, 3}, {2, 2}, {0, 0}, {1, 1}, true},
      {{2, 2}, {3, 3}, {0, 0}, {1, 1}, false}, {{3, 3}, {1, 1}, {1, 1}, {2, 2}, false}};
  const float inf = std::numeric_limits<float>::infinity();
  for (const Window& w : windows)
    for (DType dt : {kFloat32, kBFloat16})
      for (bool channels_last : {false, true}) {
        const Shape s = {2, 16, 13, 11};
        SCOPED_TRACE(dtype_name(dt) + std::string(channels_last ? " NHWC" : "") + " kernel " +
                     str(w.kernel) + " stride " + str(w.stride) + " dilation " + str(w.dilation));
        Tensor x = round(random(s, kFloat32, -2, 2));
        x.view({-1}).narrow(0, 5, 1).fill_(std::nanf(""));
        x.view({-1}).narrow(0, 6, 1).fill_(std::nanf(""));
        x.view({-1}).narrow(0, 40, 3).fill_(-inf);
        x = x.to(dt).cuda();
        if (channels_last) x = x.contiguous(MemoryFormat::ChannelsLast);
        auto pool = [&](const Tensor& t) {
          return max_pool2d(t, w.kernel, w.stride, w.padding, w.dilation, w.ceil);
        };
        const Tensor g = random(pool(x).sizes(), kFloat32, -1, 1).to(dt).cuda();
        auto loss_of = [&](const Tensor& t) { return (pool(t) * g).sum(); };
        auto grad = [&](bool compiled) {
          Tensor t = x.clone().requires_grad_();
          (compiled ? compile(loss_of)(t) : loss_of(t)).backward();
          return t.grad();
        };
        Tensor got;
        const std::string log = log_of("output_code", [&] { got = grad(true); });
        const bool dilated = w.dilation[0] > 1;
        EXPECT_EQ(log.find("extern max_pool2d_backward") != std::string::npos, dilated) << log;
        EXPECT_TRUE(allclose(got.cpu(), grad(false).cpu(), 0, 0, /*equal_nan=*/true));
      }
}

TEST(CudaMaxPool, CompiledTrainingMatchesEager) {
  COIL_REQUIRE_GPU();
  compiler_reset();
  manual_seed(3);
  const Tensor x0 = random({4, 8, 14, 14}).cuda().contiguous(MemoryFormat::ChannelsLast);
  const Tensor g = random({4, 8, 7, 7}).cuda();
  auto loss_of = [&](const Tensor& x) {
    return (max_pool2d(relu(x), {3, 3}, {2, 2}, {1, 1}) * g).sum();
  };
  auto grad = [&](bool compiled) {
    Tensor x = x0.clone().requires_grad_();
    (compiled ? compile(loss_of)(x) : loss_of(x)).backward();
    return x.grad();
  };
  expect_close(grad(true).cpu(), values(grad(false).cpu()), x0.sizes(), 1e-6, 1e-6);
}

}  // namespace
