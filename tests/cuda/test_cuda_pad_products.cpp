// Products with unaligned sizes in 16-bit floats run padded on the GPU (passes/pad_products.cpp):
// a tied head's vocabulary of 67 (N), and in training its gradients (K for the input's, M for
// the weight's), compiled under autocast against eager, which runs them unpadded. The padded
// graph returns the logits contiguous, as eager does.
#include <gtest/gtest.h>

#include <coil/coil.h>

#include "cuda_testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

struct Head {
  Tensor x, w, target;
};

Head head() {
  manual_seed(11);
  const Device cuda("cuda");
  return {random({96, 64}).to(cuda), random({67, 64}, kFloat32, -0.2, 0.2).to(cuda),
          random({96, 67}).to(cuda)};
}

Tensor logits_of(const Tensor& x, const Tensor& w) {
  autocast on(DeviceType::CUDA, kBFloat16);
  return linear(x, w);
}

TEST(CudaPadProducts, AnUnalignedHeadRunsPaddedAndReturnsEagersStrides) {
  COIL_REQUIRE_GPU();
  compiler_reset();
  const Head h = head();
  Tensor got;
  const std::string log = log_of("post_grad_graphs", [&] { got = compile(logits_of)(h.x, h.w); });
  EXPECT_NE(log.find("coil.pad("), std::string::npos) << log;
  const Tensor want = logits_of(h.x, h.w);
  EXPECT_EQ(got.dtype(), kBFloat16);
  EXPECT_EQ(got.strides(), want.strides());
  expect_close(got.cpu(), values(want.cpu()), want.sizes(), 1.6e-2, 1e-5);
}

TEST(CudaPadProducts, ItsGradientsRunPaddedAndMatchEager) {
  COIL_REQUIRE_GPU();
  compiler_reset();
  const Head h = head();
  auto loss_of = [](const Tensor& x, const Tensor& w, const Tensor& t) {
    return mse_loss(logits_of(x, w).to(kFloat32), t);
  };
  auto grads = [&](bool compiled) {
    Tensor x = h.x.clone().requires_grad_(), w = h.w.clone().requires_grad_();
    Tensor loss = compiled ? compile(loss_of)(x, w, h.target) : loss_of(x, w, h.target);
    loss.backward();
    return std::vector<Tensor>{loss, x.grad(), w.grad()};
  };
  std::vector<Tensor> got;
  const std::string log = log_of("post_grad_graphs", [&] { got = grads(true); });
  EXPECT_NE(log.find("coil.pad("), std::string::npos) << log;
  const std::vector<Tensor> want = grads(false);
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[i].dtype(), kFloat32);
    expect_close(got[i].cpu(), values(want[i].cpu()), want[i].sizes(), 2e-2, 1e-4);
  }
}

}  // namespace
