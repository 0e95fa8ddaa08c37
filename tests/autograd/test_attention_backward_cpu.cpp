// Self-attention's backward on the CPU: the op scaled_dot_product_attention_backward, a batch
// entry a task in blocks of 64 query rows, keys past a causal block's last row skipped. Its
// gradients against the decomposed math's in float64 (create_graph takes that path), in float32
// and float64, causal or not, for sequences that end inside a block, heads read strided from one
// projection as GPT-2 makes them, 2-D to 4-D, eagerly and compiled.
#include <gtest/gtest.h>

#include <coil/coil.h>
#include <coil/profiler.h>

#include "graph/registry.h"
#include "testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

// Heads of one [batch, seq, 3 * h * d] projection, as GPT-2 splits its qkv product; a 2-D or 3-D
// shape gives q, k and v of their own.
std::vector<Tensor> operands(const Shape& shape, DType dt) {
  if (shape.size() != 4) return {random(shape, dt), random(shape, dt), random(shape, dt)};
  const int64_t b = shape[0], h = shape[1], s = shape[2], d = shape[3];
  std::vector<Tensor> out;
  for (const Tensor& t : split(random({b, s, 3 * h * d}, dt), h * d, 2))
    out.push_back(t.view({b, s, h, d}).transpose(1, 2));
  return out;
}

}  // namespace

TEST(CpuAttentionBackward, TheOpsGradientsMatchTheDecomposedMath) {
  for (const Shape& shape :
       {Shape{2, 3, 70, 8}, Shape{3, 130, 16}, Shape{1, 2, 5, 4}, Shape{6, 3}}) {
    for (bool causal : {true, false}) {
      manual_seed(11);
      const std::vector<Tensor> qkv = operands(shape, kFloat64);
      const Tensor w = random(qkv[0].sizes(), kFloat64);
      auto loss_of = [causal](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& w) {
        return (scaled_dot_product_attention(q, k, v, {}, 0.0, causal) * w).sum();
      };
      auto grads = [&](DType dt, bool compiled, bool decomposed, std::string* work) {
        std::vector<Tensor> leaves;
        for (const Tensor& t : qkv) leaves.push_back(t.to(dt).detach().requires_grad_());
        Profiler p;
        Tensor loss = compiled ? compile(loss_of)(leaves[0], leaves[1], leaves[2], w.to(dt))
                               : loss_of(leaves[0], leaves[1], leaves[2], w.to(dt));
        std::vector<Tensor> g = autograd::grad({loss}, leaves, {}, false, decomposed);
        if (work)
          for (const Profiler::Row& r : p.rows()) *work += r.name + "\n";
        return g;
      };
      const std::vector<Tensor> want = grads(kFloat64, false, true, nullptr);
      for (DType dt : {kFloat64, kFloat32}) {
        for (bool compiled : {false, true}) {
          SCOPED_TRACE(shape_str(shape) + (causal ? " causal " : " ") + dtype_name(dt) +
                       (compiled ? " compiled" : " eager"));
          std::string work;
          const std::vector<Tensor> got = grads(dt, compiled, false, &work);
          EXPECT_NE(work.find("scaled_dot_product_attention_backward"), std::string::npos) << work;
          const double tol = dt == kFloat64 ? 1e-10 : 1e-4;
          for (size_t i = 0; i < 3; ++i)
            expect_close(got[i], values(want[i]), want[i].sizes(), tol, tol);
        }
      }
    }
  }
}

// A 4-D backward's gradients are one [batch, tokens, 3, heads, features] buffer, as on the GPU:
// the concatenation of the three heads' gradients into the projection's is that buffer viewed,
// and the compiled backward copies nothing for it.
TEST(CpuAttentionBackward, GradientsStoredAsTheProjection) {
  const int64_t b = 2, s = 9, h = 2, d = 4, c = h * d;
  const std::vector<Tensor> qkv = operands({b, h, s, d}, kFloat32);
  Tensor y = scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], {}, 0.0, true);
  Tensor grads = call_op1(OpId::scaled_dot_product_attention_backward,
                          {y.cos(), qkv[0], qkv[1], qkv[2], y, true});
  EXPECT_EQ(grads.strides(), (Shape{c, s * 3 * c, d, 3 * c, 1}));
  // Compiled, with q, k and v heads of one projection: no kernel concatenates their gradients.
  auto loss_of = [&](const Tensor& x) {
    std::vector<Tensor> parts = split(x, c, 2);
    auto heads = [&](const Tensor& t) { return t.view({b, s, h, d}).transpose(1, 2); };
    return scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]), {}, 0.0,
                                        true)
        .sum();
  };
  Tensor x = random({b, s, 3 * c}).requires_grad_();
  Profiler p;
  compile(loss_of)(x).backward();
  for (const Profiler::Row& r : p.rows())
    EXPECT_FALSE(r.kind == "kernel" && r.name.find("cat") != std::string::npos) << r.name;
  ASSERT_TRUE(x.grad().defined());
}
