// Self-attention's backward on the GPU: the op scaled_dot_product_attention_backward, whose two
// kernels make dq, dk and dv without the sequence x sequence weights. Attention's gradients
// through it against float64 on the CPU (causal or not, sequences that are no multiple of the
// kernels' 64-row tiles, head sizes below 64, heads read strided from one product as GPT-2
// makes them), eagerly and in a compiled training step, with the op on the GPU in both.
#include <coil/coil.h>
#include <coil/cuda.h>
#include <coil/profiler.h>

#include "cuda_testing.h"
#include "graph/registry.h"
#include "testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

// The gradients of sum(attention(q, k, v) * w) for q, k, v, on `device`, and the names of the
// work the profiler saw.
std::pair<std::vector<Tensor>, std::string> grads(const std::vector<Tensor>& qkv, const Tensor& w,
                                                  bool causal, Device device, bool compiled) {
  std::vector<Tensor> leaves;
  for (const Tensor& t : qkv) leaves.push_back(t.detach().to(device).requires_grad_());
  auto loss_of = [causal](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& w) {
    return (scaled_dot_product_attention(q, k, v, {}, 0.0, causal) * w).sum();
  };
  std::string work;
  {
    Profiler p;
    Tensor loss = compiled ? compile(loss_of)(leaves[0], leaves[1], leaves[2], w.to(device))
                           : loss_of(leaves[0], leaves[1], leaves[2], w.to(device));
    loss.backward();
    for (const Profiler::Row& r : p.rows()) work += r.name + " (" + r.kind + ")\n";
  }
  return {{leaves[0].grad(), leaves[1].grad(), leaves[2].grad()}, work};
}

}  // namespace

TEST(CudaAttentionBackward, GradientsMatchFloat64EagerAndCompiled) {
  COIL_REQUIRE_GPU();
  struct Case {
    Shape shape;
    bool causal;
  };
  for (const Case& c : {Case{{2, 3, 100, 40}, true}, Case{{2, 3, 100, 40}, false},
                        Case{{1, 2, 130, 64}, true}, Case{{3, 17, 8}, false},
                        Case{{2, 50, 6}, true}}) {  // (a head of 6: tiles an element at a time)
    for (bool compiled : {false, true}) {
      SCOPED_TRACE(shape_str(c.shape) + (c.causal ? " causal" : "") +
                   (compiled ? ", compiled" : ", eager"));
      std::vector<Tensor> qkv = {random(c.shape), random(c.shape), random(c.shape)};
      Tensor w = random(c.shape);
      std::vector<Tensor> want64;
      for (const Tensor& t : qkv) want64.push_back(t.to(kFloat64));
      auto [want, unused] = grads(want64, w.to(kFloat64), c.causal, kCPU, false);
      auto [got, work] = grads(qkv, w, c.causal, kCUDA, compiled);
      EXPECT_NE(work.find("scaled_dot_product_attention_backward"), std::string::npos) << work;
      for (size_t i = 0; i < 3; ++i) {
        SCOPED_TRACE(i == 0 ? "dq" : i == 1 ? "dk" : "dv");
        ASSERT_EQ(got[i].device(), kCUDA);
        expect_close(got[i].cpu(), values(want[i]), want[i].sizes(), 1e-4, 1e-5);
      }
    }
  }
}

// GPT-2's layout: q, k and v are heads of one [batch, seq, 3 * width] product, strided;
// eagerly and compiled (where the gradient's concatenation of the three is the backward's
// buffer, laid out as the product).
TEST(CudaAttentionBackward, HeadsReadStridedFromOneProduct) {
  COIL_REQUIRE_GPU();
  const int64_t b = 2, s = 70, h = 2, d = 32;
  Tensor qkv = random({b, s, 3 * h * d}), g = random({b, h, s, d});
  auto loss_of = [&](const Tensor& x) {
    std::vector<Tensor> parts = split(x, h * d, 2);
    auto heads = [&](const Tensor& t) { return t.view({b, s, h, d}).transpose(1, 2); };
    Tensor y = scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]), {},
                                            0.0, true);
    return (y * g.to(y.dtype()).to(x.device())).sum();
  };
  auto run = [&](Device device, bool compiled) {
    Tensor x = qkv.to(kFloat64).to(device == kCPU ? kFloat64 : kFloat32).to(device);
    x = x.detach().requires_grad_();
    (compiled ? compile(loss_of)(x) : loss_of(x)).backward();
    return x.grad();
  };
  Tensor want = run(kCPU, false);
  for (bool compiled : {false, true}) {
    SCOPED_TRACE(compiled ? "compiled" : "eager");
    expect_close(run(kCUDA, compiled).cpu(), values(want), want.sizes(), 1e-4, 1e-5);
  }
}

// On the GPU a 4-D attention's output is stored token-major (as PyTorch's memory-efficient
// kernel stores it) and [dq, dk, dv] as one [batch, tokens, 3, heads, features] projection,
// whatever the operands' layouts: heads split from one projection, or q, k, v of their own.
TEST(CudaAttentionBackward, ResultsStoredTokenMajor) {
  COIL_REQUIRE_GPU();
  const int64_t b = 2, s = 70, h = 2, d = 32, c = h * d;
  auto attention_of = [&](const std::vector<Tensor>& qkv) {
    Tensor y = scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], {}, 0.0, true);
    Tensor g = y.detach().cos();  // any gradient of y's sizes
    Tensor grads =
        call_op1(OpId::scaled_dot_product_attention_backward, {g, qkv[0], qkv[1], qkv[2], y, true});
    return std::pair{y, grads};
  };
  std::vector<Tensor> thirds;
  for (const Tensor& t : split(random({b, s, 3 * c}), c, 2))
    thirds.push_back(t.view({b, s, h, d}).transpose(1, 2));
  const std::vector<Tensor> apart = {random({b, h, s, d}), random({b, h, s, d}),
                                     random({b, h, s, d})};
  for (const auto& qkv : {thirds, apart}) {
    SCOPED_TRACE(qkv[0].is_contiguous() ? "apart" : "thirds of one projection");
    std::vector<Tensor> on_gpu, on_cpu;
    for (const Tensor& t : qkv) on_gpu.push_back(t.cuda()), on_cpu.push_back(t.to(kFloat64));
    auto [y, grads] = attention_of(on_gpu);
    EXPECT_EQ(y.strides(), (Shape{s * c, d, c, 1}));
    EXPECT_EQ(grads.strides(), (Shape{c, s * 3 * c, d, 3 * c, 1}));
    auto [want_y, want_grads] = attention_of(on_cpu);
    EXPECT_TRUE(want_y.is_contiguous());
    EXPECT_EQ(want_grads.strides(), grads.strides());  // the CPU's entries write them so too
    expect_close(y.cpu(), values(want_y), want_y.sizes(), 1e-5, 1e-6);
    expect_close(grads.cpu(), values(want_grads), want_grads.sizes(), 1e-4, 1e-5);
  }
}

// A pre-norm transformer block (nn::MultiheadAttention, causal, whose q, k and v are thirds of
// one in-projection, then an MLP) compiled on the GPU: every parameter's gradient as eager's.
TEST(CudaAttentionBackward, ACompiledBlocksGradientsMatchEager) {
  COIL_REQUIRE_GPU();
  manual_seed(3);
  const int64_t e = 64, heads = 4, batch = 4, len = 32;
  auto make = [&] {
    auto ln1 = std::make_shared<nn::LayerNorm>(e), ln2 = std::make_shared<nn::LayerNorm>(e);
    auto attn = std::make_shared<nn::MultiheadAttention>(
        e, heads, nn::MultiheadAttentionOptions{.batch_first = true});
    auto mlp = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(e, 4 * e),
                                                std::make_shared<nn::GELU>(),
                                                std::make_shared<nn::Linear>(4 * e, e));
    auto block = std::make_shared<nn::Sequential>(ln1, attn, ln2, mlp);
    return std::tuple{block, ln1, attn, ln2, mlp};
  };
  auto [eager, eln1, eattn, eln2, emlp] = make();
  auto [twin, tln1, tattn, tln2, tmlp] = make();
  twin->load_state_dict(eager->state_dict());
  eager->to(kCUDA), twin->to(kCUDA);
  auto loss_of = [](nn::LayerNorm& ln1, nn::MultiheadAttention& attn, nn::LayerNorm& ln2,
                    nn::Sequential& mlp, const Tensor& x) {
    Tensor h = ln1.forward(x);
    Tensor y = x + attn.forward(h, h, h, {}, {}, /*is_causal=*/true);
    y = y + mlp.forward(ln2.forward(y));
    return (y * y).mean();
  };
  Tensor x = random({batch, len, e}).cuda();
  loss_of(*eln1, *eattn, *eln2, *emlp, x).backward();
  auto compiled =
      compile([&](const Tensor& in) { return loss_of(*tln1, *tattn, *tln2, *tmlp, in); });
  compiled(x).backward();
  const auto want = eager->named_parameters(), got = twin->named_parameters();
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].first);
    const Tensor w = want[i].second.grad().cpu(), g = got[i].second.grad().cpu();
    expect_close(g, values(w), w.sizes(), 1e-4, 1e-6);
  }
}
