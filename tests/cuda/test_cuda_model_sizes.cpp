// Compiled training at the sizes models run at, written as users write it: a GPT-2 block as
// nanoGPT writes it (q, k, v split from one projection, each viewed into heads and transposed,
// causal attention, a tanh-GELU MLP, the parameters passed as a std::vector<Tensor>), forward and
// backward compiled on the GPU against eager on the GPU, in float32 and in bfloat16, at 512 to
// 2048 tokens. Small sizes take other paths through the kernels (fewer tiles, no split) and
// through the buffer planner (other reuses), so these sizes are tested apart; scripts/test_gpu.sh
// runs them under compute-sanitizer's memcheck.
#include <coil/coil.h>

#include "cuda_testing.h"
#include "testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

constexpr int64_t kD = 768, kHeads = 12;

// ln1 w/b, qkv W/b, proj W/b, ln2 w/b, fc W/b, fc proj W/b, as nanoGPT's Block holds them.
std::vector<Tensor> block_parameters(DType dtype, Device device) {
  manual_seed(11);
  const double w = 0.02;
  std::vector<Tensor> p = {ones({kD}),
                           zeros({kD}),
                           random({3 * kD, kD}, kFloat32, -w, w),
                           zeros({3 * kD}),
                           random({kD, kD}, kFloat32, -w, w),
                           zeros({kD}),
                           ones({kD}),
                           zeros({kD}),
                           random({4 * kD, kD}, kFloat32, -w, w),
                           zeros({4 * kD}),
                           random({kD, 4 * kD}, kFloat32, -w, w),
                           zeros({kD})};
  for (Tensor& t : p) t = t.to(dtype).to(device).requires_grad_();
  return p;
}

Tensor nanogpt_block_loss(const Tensor& x, const std::vector<Tensor>& p) {
  const int64_t B = x.size(0), T = x.size(1);
  Tensor h = layer_norm(x, {kD}, p[0], p[1]);
  std::vector<Tensor> parts = split(linear(h, p[2], p[3]), kD, 2);
  auto heads = [&](const Tensor& t) { return t.view({B, T, kHeads, kD / kHeads}).transpose(1, 2); };
  Tensor a = scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]), {},
                                          0.0, true);
  Tensor x1 = x + linear(a.transpose(1, 2).reshape({B, T, kD}), p[4], p[5]);
  Tensor m =
      linear(gelu(linear(layer_norm(x1, {kD}, p[6], p[7]), p[8], p[9]), "tanh"), p[10], p[11]);
  return (x1 + m).pow(2).mean().to(kFloat32);
}

struct Step {
  Tensor loss;
  std::vector<Tensor> grads;  // x's, then each parameter's
};

Step train_step(int64_t B, int64_t T, DType dtype, bool compiled) {
  std::vector<Tensor> p = block_parameters(dtype, kCUDA);
  manual_seed(12);
  Tensor x = random({B, T, kD}).to(dtype).cuda().requires_grad_();
  Tensor loss = compiled ? compile(nanogpt_block_loss)(x, p) : nanogpt_block_loss(x, p);
  loss.backward();
  Step s{loss.detach().cpu(), {x.grad().cpu()}};
  for (const Tensor& t : p) s.grads.push_back(t.grad().cpu());
  return s;
}

// `got` against `want` relative to want's largest magnitude: the sums of a compiled kernel run in
// another order (and, in 16 bits, round less often) than eager's.
void expect_near(const Tensor& got, const Tensor& want, double rtol, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(got.sizes(), want.sizes());
  const Tensor g = got.to(kFloat64), w = want.to(kFloat64);
  const double scale = w.abs().amax().item<double>();
  const double error = (g - w).abs().amax().item<double>();
  EXPECT_LE(error, rtol * scale + 1e-12) << "largest |want| " << scale;
}

struct BlockSize {
  int64_t batch, tokens;
  DType dtype;
};

class NanoGptBlockOnCuda : public ::testing::TestWithParam<BlockSize> {};

TEST_P(NanoGptBlockOnCuda, CompiledTrainingMatchesEager) {
  COIL_REQUIRE_GPU();
  const auto [B, T, dtype] = GetParam();
  const Step want = train_step(B, T, dtype, false);
  const Step got = train_step(B, T, dtype, true);
  // bfloat16: eager rounds after every op and the compiled kernels after each kernel.
  const double rtol = dtype == kBFloat16 ? 4e-2 : 2e-4;
  expect_near(got.loss, want.loss, rtol, "loss");
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (size_t i = 0; i < got.grads.size(); ++i)
    expect_near(got.grads[i], want.grads[i], rtol,
                i == 0 ? std::string("x's gradient") : "parameter " + std::to_string(i - 1));
}

INSTANTIATE_TEST_SUITE_P(
    ModelSizes, NanoGptBlockOnCuda,
    ::testing::Values(BlockSize{4, 512, kFloat32}, BlockSize{8, 1024, kFloat32},
                      BlockSize{8, 2048, kFloat32}, BlockSize{4, 512, kBFloat16},
                      BlockSize{8, 1024, kBFloat16}, BlockSize{8, 2048, kBFloat16}),
    [](const ::testing::TestParamInfo<BlockSize>& i) {
      return std::to_string(i.param.batch) + "x" + std::to_string(i.param.tokens) +
             (i.param.dtype == kBFloat16 ? "_bf16" : "_f32");
    });

}  // namespace
