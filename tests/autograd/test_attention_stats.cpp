// scaled_dot_product_attention_stats, attention with its rows' log-sum-exp beside the output (what
// autograd records where a GPU's fused backward reads the log-sum-exp, cuDNN's for 16-bit
// floats): on the CPU its output is the attention's and its statistics are each row's
// log-sum-exp of the scaled scores, against float64 ops; its gradients (through the fused
// backward op, or the math where a gradient flows into the statistics too) against the
// decomposed attention's; compiled, the one extern call's two results each its own buffer (the
// second taking its result of the first's call), served again from the graph cache; errors.
#include <coil/coil.h>

#include <limits>

#include "graph/registry.h"
#include "jit/disk_cache.h"
#include "jit/jit_testing.h"
#include "testing.h"

namespace coil::testing {
namespace {

std::vector<Tensor> attention_stats(const Tensor& q, const Tensor& k, const Tensor& v,
                                    bool causal) {
  return call_op(OpId::scaled_dot_product_attention_stats, {q, k, v, causal, Arg()});
}

// The rows' log-sum-exp of the scaled, masked scores, written in ops.
Tensor log_sum_exp_by_ops(const Tensor& q, const Tensor& k, bool causal) {
  Tensor s = matmul(q, k.transpose(-2, -1)) * (1 / std::sqrt(static_cast<double>(q.size(-1))));
  if (causal)
    s = where(tril(ones({q.size(-2), k.size(-2)}, kBool)), s,
              -std::numeric_limits<double>::infinity());
  return logsumexp(s, {-1});
}

TEST(AttentionStats, OutputAndLogSumExpMatchFloat64Ops) {
  for (bool causal : {false, true})
    for (const Shape& shape : {Shape{2, 3, 17, 8}, Shape{5, 9}, Shape{1, 1, 1, 4}}) {
      SCOPED_TRACE(shape_str(shape) + (causal ? " causal" : ""));
      Tensor q = random(shape), k = random(shape), v = random(shape);
      std::vector<Tensor> r = attention_stats(q, k, v, causal);
      ASSERT_EQ(r.size(), 2u);
      EXPECT_EQ(r[1].dtype(), kFloat32);
      EXPECT_EQ(attention_stats(q.to(kFloat64), q.to(kFloat64), q.to(kFloat64), causal)[1].dtype(),
                kFloat64);
      EXPECT_EQ(r[1].sizes(), Shape(shape.begin(), shape.end() - 1));
      Tensor q64 = q.to(kFloat64), k64 = k.to(kFloat64), v64 = v.to(kFloat64);
      Tensor want = scaled_dot_product_attention(q64, k64, v64, {}, 0.0, causal);
      expect_close(r[0], values(want), want.sizes(), 1e-5, 1e-6);
      Tensor lse = log_sum_exp_by_ops(q64, k64, causal);
      expect_close(r[1], values(lse), lse.sizes(), 1e-6, 1e-6);
    }
}

// sum(out * w) + sum(stats * u): the gradient into the statistics takes the math (each score's
// share of its row's log-sum-exp is its weight), against float64 autograd of the ops.
TEST(AttentionStats, GradientsWithAndWithoutOneIntoTheStatistics) {
  for (bool into_stats : {false, true}) {
    SCOPED_TRACE(into_stats ? "a gradient into the statistics" : "the output's alone");
    const Shape shape = {2, 2, 11, 4};
    manual_seed(3);
    std::vector<Tensor> qkv = {random(shape, kFloat64), random(shape, kFloat64),
                               random(shape, kFloat64)};
    Tensor w = random(shape, kFloat64), u = random({2, 2, 11}, kFloat64);
    auto leaves = [&] {
      std::vector<Tensor> l;
      for (const Tensor& t : qkv) l.push_back(t.detach().requires_grad_());
      return l;
    };
    std::vector<Tensor> got = leaves(), want = leaves();
    std::vector<Tensor> r = attention_stats(got[0], got[1], got[2], true);
    Tensor loss = (r[0] * w).sum();
    if (into_stats) loss = loss + (r[1].to(kFloat64) * u).sum();
    loss.backward();
    Tensor ref = (scaled_dot_product_attention(want[0], want[1], want[2], {}, 0.0, true) * w).sum();
    if (into_stats) ref = ref + (log_sum_exp_by_ops(want[0], want[1], true) * u).sum();
    ref.backward();
    for (int i = 0; i < 3; ++i) {
      SCOPED_TRACE(std::string("d") + "qkv"[i]);
      expect_close(got[i].grad(), values(want[i].grad()), shape, 1e-6, 1e-6);
    }
  }
}

TEST(AttentionStats, CrossAttentionIsAClearError) {
  Tensor q = random({1, 2, 5, 4}), kv = random({1, 2, 7, 4});
  EXPECT_COIL_ERROR(attention_stats(q, kv, kv, false), "scaled_dot_product_attention_stats: key");
  EXPECT_COIL_ERROR(attention_stats(q, kv, kv, false), "self-attention");
}

class AttentionStatsCompiled : public JitTest {};

// Both results of the one call leave the compiled function (one read by a kernel), and a new
// process's compile is served from the graph cache with the same results.
TEST_F(AttentionStatsCompiled, BothResultsOfOneExternCall) {
  auto f = [](const Tensor& q, const Tensor& k, const Tensor& v) {
    std::vector<Tensor> r = attention_stats(q, k, v, true);
    return std::vector<Tensor>{r[0], r[1] * 2.0};
  };
  Tensor q = random({2, 3, 9, 8}), k = random({2, 3, 9, 8}), v = random({2, 3, 9, 8});
  const std::vector<Tensor> want = f(q, k, v);
  const int64_t misses = counters()["graph_cache_misses"];
  const std::vector<Tensor> got = compile(f)(q, k, v);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(equal(got[0], want[0]));
  EXPECT_TRUE(allclose(got[1], want[1], 1e-6, 1e-6));
  EXPECT_EQ(counters()["graph_cache_misses"], misses + 1);
  compiler_reset();
  jit::clear_memory_cache();
  jit::reset_stats();
  const int64_t hits = counters()["graph_cache_hits"];
  const std::vector<Tensor> again = compile(f)(q, k, v);
  EXPECT_EQ(counters()["graph_cache_hits"], hits + 1);
  EXPECT_TRUE(equal(again[0], got[0]));
  EXPECT_TRUE(equal(again[1], got[1]));
}

// The program's text names the later result as its call's, not as a second call.
TEST_F(AttentionStatsCompiled, TheProgramSaysWhichCallALaterResultTakes) {
  auto f = [](const Tensor& q) {
    std::vector<Tensor> r = attention_stats(q, q, q, false);
    return r[0].sum() + r[1].sum();
  };
  Tensor q = random({1, 2, 5, 8});
  const std::string code = log_of("output_code", [&] { compile(f)(q); });
  EXPECT_NE(code.find("extern scaled_dot_product_attention_stats"), std::string::npos) << code;
  EXPECT_NE(code.find("result 1 of"), std::string::npos) << code;
}

}  // namespace
}  // namespace coil::testing
