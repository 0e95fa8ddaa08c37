// Attention in bfloat16 and float16 on the GPU: cuDNN's flash attention on the tensor cores
// (backends/cuda/cudnn_attention.h), forward and self-attention's backward, against attention
// written out in float64 at PyTorch's tolerances for the dtype: causal or not, sequences that
// are no multiple of a tile, head sizes up to 128, cross-attention (more or fewer keys than
// queries), heads read strided from one projection, eagerly and in a compiled training step,
// and attention written out by hand, compiled.
// Each case also checks that cuDNN's plan ran (not coil's CUDA-core kernel).
#include <coil/coil.h>

#include <limits>

#include "backends/cuda/cudnn_attention.h"
#include "backends/cuda/cudnn_calls.h"
#include "cuda_testing.h"
#include "testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

// Whether cuDNN built a plan for a graph whose line starts with `what`.
bool cudnn_ran(const std::string& what) {
  for (const std::string& line : cuda::cudnn_attention_graphs())
    if (line.rfind(what, 0) == 0 && line.find("cuDNN's plan") != std::string::npos) return true;
  return false;
}

// The times cuDNN's plans for graphs whose lines start with `what` ran.
int64_t runs_of(const std::string& what) {
  int64_t runs = 0;
  for (const std::string& line : cuda::cudnn_attention_graphs())
    if (line.rfind(what, 0) == 0 && line.find("cuDNN's plan, ") != std::string::npos)
      runs += std::stoll(line.substr(line.find("cuDNN's plan, ") + 14));
  return runs;
}

std::string graphs() {
  std::string s;
  for (const std::string& line : cuda::cudnn_attention_graphs()) s += line + "\n";
  return s;
}

struct Case {
  Shape q, kv;  // [batch, heads, tokens, head]; kv's tokens may differ (cross-attention)
  bool causal;
  DType dtype;
};

std::string name_of(const ::testing::TestParamInfo<Case>& i) {
  const Case& c = i.param;
  std::string s;
  for (int64_t d : c.q) s += std::to_string(d) + "x";
  return s + std::to_string(c.kv[2]) + (c.causal ? "_causal_" : "_") + dtype_name(c.dtype);
}

class Attention16OnCuda : public ::testing::TestWithParam<Case> {};

// The output and, for self-attention, the gradients of sum(y * w), eagerly and compiled. A
// self-attention's forward keeps the rows' log-sum-exp for its backward, which then runs no
// forward of its own: one run of each graph per step.
TEST_P(Attention16OnCuda, MatchesFloat64) {
  COIL_REQUIRE_GPU();
  if (!cuda::cudnn_available()) GTEST_SKIP() << "cuDNN does not load";
  const Case c = GetParam();
  const bool self = c.q == c.kv;
  manual_seed(7);
  std::vector<Tensor> qkv, qkv64;
  for (const Shape& s : {c.q, c.kv, c.kv}) {
    Tensor t = random(s, kFloat32, -1, 1).to(c.dtype).cuda();
    qkv.push_back(t);
    qkv64.push_back(t.to(kFloat64));
  }
  Tensor w = random(c.q, kFloat32, -1, 1).to(c.dtype).cuda();
  auto loss_of = [&](const Tensor& q, const Tensor& k, const Tensor& v) {
    Tensor y = scaled_dot_product_attention(q, k, v, {}, 0.0, c.causal);
    return std::pair{y, (y.to(kFloat32) * w.to(kFloat32)).sum()};
  };
  std::vector<Tensor> want_leaves;
  for (const Tensor& t : qkv64) want_leaves.push_back(t.detach().requires_grad_());
  Tensor want = attention_by_ops(want_leaves[0], want_leaves[1], want_leaves[2], c.causal);
  (want * w.to(kFloat64)).sum().backward();
  const double rtol = rtol_for(c.dtype);
  for (bool compiled : {false, true}) {
    SCOPED_TRACE(compiled ? "compiled" : "eager");
    std::vector<Tensor> leaves;
    for (const Tensor& t : qkv) leaves.push_back(t.detach().requires_grad_());
    auto step = [&](const Tensor& q, const Tensor& k, const Tensor& v) {
      auto [y, loss] = loss_of(q, k, v);
      return std::vector<Tensor>{y, loss};
    };
    const std::string keeping =
                          std::string("forward keeping the log-sum-exp ") + dtype_name(c.dtype),
                      backward = std::string("backward ") + dtype_name(c.dtype);
    const int64_t kept_before = runs_of(keeping), backward_before = runs_of(backward);
    std::vector<Tensor> out = compiled ? compile(step)(leaves[0], leaves[1], leaves[2])
                                       : step(leaves[0], leaves[1], leaves[2]);
    EXPECT_EQ(out[0].dtype(), c.dtype);
    expect_near_largest(out[0], want, rtol, "the output");
    EXPECT_TRUE(cudnn_ran(self ? keeping : std::string("forward ") + dtype_name(c.dtype)))
        << graphs();
    if (!self) continue;
    out[1].backward();
    for (int i = 0; i < 3; ++i)
      expect_near_largest(leaves[i].grad(), want_leaves[i].grad(), 2 * rtol,
                          std::string("d") + "qkv"[i]);
    EXPECT_EQ(runs_of(keeping) - kept_before, 1) << graphs();
    EXPECT_EQ(runs_of(backward) - backward_before, 1) << graphs();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Attention16OnCuda,
    ::testing::Values(Case{{2, 3, 100, 64}, {2, 3, 100, 64}, true, kBFloat16},
                      Case{{2, 3, 100, 64}, {2, 3, 100, 64}, false, kFloat16},
                      Case{{1, 2, 129, 128}, {1, 2, 129, 128}, true, kFloat16},
                      Case{{1, 2, 1, 128}, {1, 2, 1, 128}, false, kBFloat16},
                      Case{{2, 4, 65, 80}, {2, 4, 65, 80}, false, kBFloat16},
                      Case{{1, 3, 70, 64}, {1, 3, 130, 64}, true, kBFloat16},
                      Case{{1, 3, 130, 32}, {1, 3, 70, 32}, false, kFloat16},
                      Case{{8, 12, 1024, 64}, {8, 12, 1024, 64}, true, kBFloat16},
                      Case{{4, 32, 512, 128}, {4, 32, 512, 128}, false, kBFloat16}),
    name_of);

// GPT-2's layout in bfloat16: q, k and v are heads of one [batch, seq, 3 * width] product, read
// strided; the gradient of the product against float64.
TEST(Attention16OnCuda, HeadsReadStridedFromOneProduct) {
  COIL_REQUIRE_GPU();
  if (!cuda::cudnn_available()) GTEST_SKIP() << "cuDNN does not load";
  const int64_t b = 2, s = 70, h = 4, d = 64;
  Tensor qkv = random({b, s, 3 * h * d}, kFloat32, -1, 1).to(kBFloat16),
         g = random({b, h, s, d}, kFloat32, -1, 1);
  auto loss_of = [&](const Tensor& x) {
    std::vector<Tensor> parts = split(x, h * d, 2);
    auto heads = [&](const Tensor& t) { return t.view({b, s, h, d}).transpose(1, 2); };
    Tensor y = scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]), {},
                                            0.0, true);
    const DType acc = x.dtype() == kFloat64 ? kFloat64 : kFloat32;
    return (y.to(acc) * g.to(acc).to(x.device())).sum();
  };
  Tensor x64 = qkv.to(kFloat64).requires_grad_();
  loss_of(x64).backward();
  for (bool compiled : {false, true}) {
    SCOPED_TRACE(compiled ? "compiled" : "eager");
    Tensor x = qkv.cuda().requires_grad_();
    (compiled ? compile(loss_of)(x) : loss_of(x)).backward();
    expect_near_largest(x.grad(), x64.grad(), 2 * rtol_for(kBFloat16), "the product's gradient");
  }
  EXPECT_TRUE(cudnn_ran("backward bfloat16")) << graphs();
}

// Operands cuDNN does not take (a head of 6 features: rows not 16-byte aligned) run coil's own
// kernel and still match.
TEST(Attention16OnCuda, UnalignedHeadsTakeCoilsKernel) {
  COIL_REQUIRE_GPU();
  EXPECT_FALSE(cuda::cudnn_attention_takes(kBFloat16, 6, 6));
  EXPECT_FALSE(cuda::cudnn_attention_takes(kFloat32, 64, 64));
  EXPECT_FALSE(cuda::cudnn_attention_takes(kBFloat16, 136, 136));
  Tensor q = random({2, 2, 33, 6}, kFloat32, -1, 1).to(kBFloat16);
  Tensor y = scaled_dot_product_attention(q.cuda(), q.cuda(), q.cuda(), {}, 0.0, true);
  Tensor q64 = q.to(kFloat64);
  expect_near_largest(y, attention_by_ops(q64, q64, q64, true), rtol_for(kBFloat16), "output");
}

// Attention written out in bfloat16, and in float32 under autocast (which casts the softmax to
// float32 and back), compiles to one call of cuDNN's plan (passes/fuse_attention.cpp) and
// matches float64 at bfloat16's tolerance.
TEST(Attention16OnCuda, WrittenOutAttentionCompilesToCudnn) {
  COIL_REQUIRE_GPU();
  if (!cuda::cudnn_available()) GTEST_SKIP() << "cuDNN does not load";
  const Shape s{2, 4, 96, 64};
  std::vector<Tensor> qkv;
  for (int i = 0; i < 3; ++i) qkv.push_back(random(s, kFloat32, -1, 1).to(kBFloat16).cuda());
  auto written = [](const Tensor& q, const Tensor& k, const Tensor& v) {
    return matmul(softmax(matmul(q, k.transpose(-2, -1)) * 0.125, -1), v);
  };
  auto autocast_written = [&](const Tensor& q, const Tensor& k, const Tensor& v) {
    autocast on(DeviceType::CUDA, kBFloat16);
    return written(q, k, v);
  };
  const Tensor want =
      attention_by_ops(qkv[0].to(kFloat64), qkv[1].to(kFloat64), qkv[2].to(kFloat64), false);
  for (bool amp : {false, true}) {
    SCOPED_TRACE(amp ? "under autocast" : "in bfloat16");
    const int64_t before = runs_of("forward bfloat16");
    std::vector<Tensor> in = qkv;
    if (amp)
      for (Tensor& t : in) t = t.to(kFloat32);
    Tensor y = amp ? compile(autocast_written)(in[0], in[1], in[2])
                   : compile(written)(in[0], in[1], in[2]);
    EXPECT_EQ(y.dtype(), kBFloat16);
    expect_near_largest(y, want, rtol_for(kBFloat16), "the output");
    EXPECT_EQ(runs_of("forward bfloat16") - before, 1) << graphs();
  }
}

}  // namespace
