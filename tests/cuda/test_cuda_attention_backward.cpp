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

// On the GPU the attention's output is written in the query's order (token-major for heads
// split from one product, as PyTorch's memory-efficient kernel), and [dq, dk, dv] as q, k and v
// lie in that product; q, k and v of their own give the gradients in the query's order.
TEST(CudaAttentionBackward, ResultsLaidOutAsTheOperands) {
  COIL_REQUIRE_GPU();
  const int64_t b = 2, s = 70, h = 2, d = 32, c = h * d;
  Tensor x = random({b, s, 3 * c});
  auto attention_of = [&](const Tensor& product, Device device) {
    std::vector<Tensor> parts = split(product.to(device), c, 2);
    std::vector<Tensor> heads;
    for (const Tensor& t : parts) heads.push_back(t.view({b, s, h, d}).transpose(1, 2));
    Tensor y = scaled_dot_product_attention(heads[0], heads[1], heads[2], {}, 0.0, true);
    Tensor g = y.detach().cos();  // any gradient of y's sizes
    Tensor grads = call_op1(OpId::scaled_dot_product_attention_backward,
                            {g, heads[0], heads[1], heads[2], y, true});
    return std::pair{y, grads};
  };
  auto [y, grads] = attention_of(x, kCUDA);
  EXPECT_EQ(y.strides(), (Shape{s * c, d, c, 1}));
  EXPECT_EQ(grads.strides(), (Shape{c, s * 3 * c, d, 3 * c, 1}));
  auto [want_y, want_grads] = attention_of(x.to(kFloat64), kCPU);
  EXPECT_TRUE(want_y.is_contiguous() && want_grads.is_contiguous());
  expect_close(y.cpu(), values(want_y), want_y.sizes(), 1e-5, 1e-6);
  expect_close(grads.cpu(), values(want_grads), want_grads.sizes(), 1e-4, 1e-5);

  Tensor q = random({b, s, h, d}).cuda().transpose(1, 2);
  Tensor apart = call_op1(OpId::scaled_dot_product_attention_backward, {q, q, q, q, q, false});
  EXPECT_EQ(apart.strides(), (Shape{b * s * c, s * c, d, c, 1}));
}

// A mismatched operand is a clear error naming it.
TEST(CudaAttentionBackward, OperandsOfOtherShapesAreAClearError) {
  Tensor q = random({2, 5, 8}), k = random({2, 6, 8});
  EXPECT_COIL_ERROR(call_op1(OpId::scaled_dot_product_attention_backward, {q, q, k, q, q, false}),
                    "key f32[2, 6, 8] must have the query's sizes and dtype f32[2, 5, 8]");
  EXPECT_COIL_ERROR(
      call_op1(OpId::scaled_dot_product_attention_backward, {q, q, q, q, q.to(kFloat64), false}),
      "out f64[2, 5, 8]");
}

// On the CPU the op is the math path's backward: attention's own gradients (the rule's, which
// takes the op only on a GPU), for the output and its gradient.
TEST(CudaAttentionBackward, OnTheCpuItIsAttentionsGradient) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "no mask");
    std::vector<Tensor> qkv = {random({2, 9, 6}, kFloat64), random({2, 9, 6}, kFloat64),
                               random({2, 9, 6}, kFloat64)};
    Tensor g = random({2, 9, 6}, kFloat64);
    auto [want, unused] = grads(qkv, g, causal, kCPU, false);
    Tensor out = scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], {}, 0.0, causal);
    Tensor got = call_op1(OpId::scaled_dot_product_attention_backward,
                          {g, qkv[0], qkv[1], qkv[2], out, causal});
    for (int64_t i = 0; i < 3; ++i)
      expect_close(got.select(0, i), values(want[i]), want[i].sizes(), 1e-10, 1e-12);
  }
}
