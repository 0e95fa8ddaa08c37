// Compiled training at the sizes models run at, written as users write it, against eager on the
// GPU: a GPT-2 block as nanoGPT writes it (q, k, v split from one projection, each viewed into
// heads and transposed, causal attention, a tanh-GELU MLP, the parameters passed as a
// std::vector<Tensor>) and with Hugging Face's attention by hand, in float32 and bfloat16 at 512
// to 2048 tokens; GPT-2's modules (parameters as module members); ResNet-50 at full width. Small
// sizes take other paths through the kernels (fewer tiles, no split) and through the buffer
// planner (other reuses), so these sizes are tested apart; scripts/test_gpu.sh runs them under
// compute-sanitizer's memcheck.
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

// Causal attention as Hugging Face's eager GPT-2 writes it: the scores, a lower-triangular
// mask, softmax, the weighted values.
Tensor attention_by_hand(const Tensor& q, const Tensor& k, const Tensor& v) {
  const int64_t T = q.size(-2);
  Tensor w = matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(q.size(-1)));
  Tensor mask = tril(ones({T, T}, kBool, q.device()));
  w = where(mask, w, full({}, -1e4, w.dtype(), w.device()));
  return matmul(softmax(w, -1), v);
}

template <bool kByHand>
Tensor block_loss(const Tensor& x, const std::vector<Tensor>& p) {
  const int64_t B = x.size(0), T = x.size(1);
  Tensor h = layer_norm(x, {kD}, p[0], p[1]);
  std::vector<Tensor> parts = split(linear(h, p[2], p[3]), kD, 2);
  auto heads = [&](const Tensor& t) { return t.view({B, T, kHeads, kD / kHeads}).transpose(1, 2); };
  Tensor a = kByHand ? attention_by_hand(heads(parts[0]), heads(parts[1]), heads(parts[2]))
                     : scaled_dot_product_attention(heads(parts[0]), heads(parts[1]),
                                                    heads(parts[2]), {}, 0.0, true);
  Tensor x1 = x + linear(a.transpose(1, 2).reshape({B, T, kD}), p[4], p[5]);
  Tensor m =
      linear(gelu(linear(layer_norm(x1, {kD}, p[6], p[7]), p[8], p[9]), "tanh"), p[10], p[11]);
  return (x1 + m).pow(2).mean().to(kFloat32);
}

struct Step {
  Tensor loss;
  std::vector<Tensor> grads;  // x's, then each parameter's
};

Step train_step(int64_t B, int64_t T, DType dtype, bool compiled, bool by_hand) {
  std::vector<Tensor> p = block_parameters(dtype, kCUDA);
  manual_seed(12);
  Tensor x = random({B, T, kD}).to(dtype).cuda().requires_grad_();
  auto loss_of = by_hand ? block_loss<true> : block_loss<false>;
  Tensor loss = compiled ? compile(loss_of)(x, p) : loss_of(x, p);
  loss.backward();
  Step s{loss.detach().cpu(), {x.grad().cpu()}};
  for (const Tensor& t : p) s.grads.push_back(t.grad().cpu());
  return s;
}

struct BlockSize {
  int64_t batch, tokens;
  DType dtype;
  bool by_hand = false;  // Hugging Face's attention by hand, else scaled_dot_product_attention
};

class NanoGptBlockOnCuda : public ::testing::TestWithParam<BlockSize> {};

TEST_P(NanoGptBlockOnCuda, CompiledTrainingMatchesEager) {
  COIL_REQUIRE_GPU();
  const auto [B, T, dtype, by_hand] = GetParam();
  const Step want = train_step(B, T, dtype, false, by_hand);
  const Step got = train_step(B, T, dtype, true, by_hand);
  // bfloat16: eager rounds after every op and the compiled kernels after each kernel.
  const double rtol = dtype == kBFloat16 ? 4e-2 : 2e-4;
  expect_near_largest(got.loss, want.loss, rtol, "loss");
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (size_t i = 0; i < got.grads.size(); ++i)
    expect_near_largest(
        got.grads[i], want.grads[i], rtol,
        i == 0 ? std::string("x's gradient") : "parameter " + std::to_string(i - 1));
}

INSTANTIATE_TEST_SUITE_P(
    ModelSizes, NanoGptBlockOnCuda,
    ::testing::Values(BlockSize{4, 512, kFloat32}, BlockSize{8, 1024, kFloat32},
                      BlockSize{8, 2048, kFloat32}, BlockSize{4, 512, kBFloat16},
                      BlockSize{8, 1024, kBFloat16}, BlockSize{8, 2048, kBFloat16},
                      BlockSize{8, 1024, kFloat32, true}, BlockSize{4, 512, kBFloat16, true}),
    [](const ::testing::TestParamInfo<BlockSize>& i) {
      return std::to_string(i.param.batch) + "x" + std::to_string(i.param.tokens) +
             (i.param.dtype == kBFloat16 ? "_bf16" : "_f32") + (i.param.by_hand ? "_by_hand" : "");
    });

// Every parameter's gradient of two models, compiled against eager, by name.
void expect_same_gradients(nn::Module& got, nn::Module& want, double rtol) {
  const auto g = got.named_parameters(), w = want.named_parameters();
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_TRUE(g[i].second.grad().defined()) << g[i].first;
    expect_near_largest(g[i].second.grad(), w[i].second.grad(), rtol, g[i].first);
  }
}

// GPT-2 small's modules (two of its layers, the whole vocabulary), its parameters module members,
// a language model's loss, at 8 x 512 and 8 x 1024 tokens.
TEST(ModelSizesOnCuda, Gpt2TrainingStepMatchesEager) {
  COIL_REQUIRE_GPU();
  for (int64_t T : {512, 1024}) {
    SCOPED_TRACE(std::to_string(T) + " tokens");
    manual_seed(13);
    auto eager = nn::gpt2({.n_layer = 2});
    auto twin = nn::gpt2({.n_layer = 2});
    twin->load_state_dict(eager->state_dict());
    eager->to(kCUDA), twin->to(kCUDA);
    Tensor ids = randint(0, 50257, {8, T + 1}).cuda();
    Tensor x = ids.narrow(1, 0, T), y = ids.narrow(1, 1, T);
    auto loss_of = [](nn::GPT2& m, const Tensor& x, const Tensor& y) {
      Tensor logits = m.forward(x);
      return cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
    };
    Tensor want = loss_of(*eager, x, y);
    want.backward();
    Tensor got =
        compile([&](const Tensor& a, const Tensor& b) { return loss_of(*twin, a, b); })(x, y);
    got.backward();
    expect_near_largest(got.cpu(), want.cpu(), 1e-5, "loss");
    expect_same_gradients(*twin, *eager, 2e-4);
  }
}

// ResNet-50 at full width, a batch of 8 images of 224 x 224, in training (batch statistics).
// Through fifty layers of batch norm a float32 step's gradients stray far from float64's (a few
// percent at the stem), in eager as compiled: the compiled step's gradients are held to float64's
// within a few times eager's distance from them.
TEST(ModelSizesOnCuda, Resnet50TrainingStepMatchesEager) {
  COIL_REQUIRE_GPU();
  manual_seed(14);
  auto reference = nn::resnet50({.dtype = kFloat64}), eager = nn::resnet50(), twin = nn::resnet50();
  eager->load_state_dict(reference->state_dict());
  twin->load_state_dict(reference->state_dict());
  for (nn::Module* m :
       {static_cast<nn::Module*>(reference.get()), static_cast<nn::Module*>(eager.get()),
        static_cast<nn::Module*>(twin.get())})
    m->to(kCUDA), m->train();
  Tensor images = random({8, 3, 224, 224}, kFloat64).cuda();
  Tensor labels = randint(0, 1000, {8}).cuda();
  cross_entropy(reference->forward(images), labels).backward();
  Tensor want = cross_entropy(eager->forward(images.to(kFloat32)), labels);
  want.backward();
  Tensor got = compile([&](const Tensor& x, const Tensor& y) {
    return cross_entropy(twin->forward(x), y);
  })(images.to(kFloat32), labels);
  got.backward();
  expect_near_largest(got.cpu(), want.cpu(), 1e-5, "loss");
  const auto r = reference->named_parameters(), e = eager->named_parameters(),
             c = twin->named_parameters();
  ASSERT_EQ(r.size(), c.size());
  for (size_t i = 0; i < r.size(); ++i) {
    SCOPED_TRACE(r[i].first);
    const Tensor ref = r[i].second.grad().cpu();
    const double scale = ref.abs().amax().item<double>();
    auto distance = [&](const Tensor& g) {
      return (g.grad().cpu().to(kFloat64) - ref).abs().amax().item<double>();
    };
    EXPECT_LE(distance(c[i].second), 4 * distance(e[i].second) + 1e-5 * scale)
        << "largest |float64's gradient| " << scale;
  }
}

}  // namespace
