// Decompositions of linear, matmul, dropout, the losses, attention and stack against their
// eager kernels: every rank combination matmul distinguishes, every reduction and target kind
// of the losses, masks of every kind, 16-bit and strided inputs.
#include <limits>

#include "decomp_testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

// Class indices in [0, classes) with every third one set to `ignore`.
Tensor targets(const Shape& sizes, int64_t classes, int64_t ignore) {
  std::vector<double> v = values(rnd(sizes, kInt64, false, 0, static_cast<double>(classes)));
  for (size_t i = 0; i < v.size(); i += 3) v[i] = static_cast<double>(ignore);
  return tensor<double>(v, sizes).to(kInt64);
}

TEST(DecomposeProducts, Linear) {
  for (DType t : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(t));
    Tensor w = rnd({5, 6}, t, true), b = rnd({5}, t);
    check_decomposition(OpId::linear, {rnd({4, 6}, t, true), w, b});
    check_decomposition(OpId::linear, {rnd({4, 6}, t), w});
    check_decomposition(OpId::linear, {rnd({6}, t), w, b});  // 1-D input
    check_decomposition(OpId::linear, {rnd({2, 3, 6}, t, true), w, b});
    check_decomposition(OpId::linear, {rnd({2, 1, 3, 6}, t), w});
    // A bias with batch dims does not fold into addmm.
    check_decomposition(OpId::linear, {rnd({2, 3, 6}, t), w, rnd({3, 5}, t)});
  }
  check_decomposition(OpId::linear, {rnd({0, 6}), rnd({5, 6}), rnd({5})});
}

TEST(DecomposeProducts, MatmulRanks) {
  // Every pair of ranks from 1 to 4, batch dims broadcasting.
  const std::vector<Shape> lhs = {{6}, {4, 6}, {3, 4, 6}, {2, 1, 4, 6}};
  const std::vector<Shape> rhs = {{6}, {6, 5}, {3, 6, 5}, {1, 3, 6, 5}};
  for (const Shape& a : lhs)
    for (const Shape& b : rhs) check_decomposition(OpId::matmul, {rnd(a), rnd(b, kFloat32, true)});
}

TEST(DecomposeProducts, MatmulDtypes) {
  for (DType t : {kFloat64, kFloat16, kBFloat16, kInt64}) {
    SCOPED_TRACE(dtype_name(t));
    check_decomposition(OpId::matmul, {rnd({2, 3, 5}, t, true), rnd({5, 4}, t)});
    check_decomposition(OpId::matmul, {rnd({3, 5}, t), rnd({2, 5, 1}, t, true)});
  }
  check_decomposition(OpId::matmul, {rnd({0, 3, 5}), rnd({5, 4})});
  check_decomposition(OpId::matmul, {rnd({2, 3, 0}), rnd({0, 4})});
}

TEST(DecomposeDropout, EveryMode) {
  for (DType t : kFloatTypes) {
    Tensor x = rnd({3, 5}, t, true);
    check_decomposition(OpId::dropout, {x, F(0.5), B(false)});
    check_decomposition(OpId::dropout, {x, F(0), B(true)});
    check_decomposition(OpId::dropout, {x, F(1), B(true)});  // x * 0: draws nothing
    check_decomposition(OpId::dropout, {x, F(0.25), B(true)});
  }
}

// Training dropout decomposes into rand and pointwise ops: compiled, with the same seed, it keeps
// the eager kernel's elements and computes their values as it does.
TEST(DecomposeDropout, DrawsTheEagerKernelsMask) {
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtype_name(t));
    Tensor x = rnd({37, 29}, t, true).detach();
    x.narrow(0, 0, 1).fill_(NAN);  // a dropped NaN stays NaN
    auto f = compile([](const Tensor& v) { return dropout(v * 2.0, 0.3, true); });
    manual_seed(9);
    Tensor want = dropout(x * 2.0, 0.3, true);
    manual_seed(9);
    Tensor got = f(x);
    EXPECT_TRUE(equal(isnan(got), isnan(want)));
    EXPECT_TRUE(equal(where(isnan(got), 0.0, got), where(isnan(want), 0.0, want)));
  }
}

TEST(DecomposeLosses, NllLoss) {
  for (const char* reduction : {"mean", "sum", "none"}) {
    SCOPED_TRACE(reduction);
    for (DType t : kFloatTypes) {
      SCOPED_TRACE(dtype_name(t));
      Tensor x = rnd({4, 6}, t, true);
      check_decomposition(OpId::nll_loss, {x, targets({4}, 6, -100), Str(reduction)});
      check_decomposition(OpId::nll_loss, {x, targets({4}, 6, 2), Str(reduction), I(2)});
    }
    check_decomposition(OpId::nll_loss,
                        {rnd({2, 5, 3, 2}), targets({2, 3, 2}, 5, 7), Str(reduction), I(7)});
    check_decomposition(OpId::nll_loss, {rnd({5}), targets({}, 5, 1), Str(reduction)});  // [C]
  }
  // Every target ignored: the mean is 0 / 0.
  check_decomposition(OpId::nll_loss, {rnd({2, 3}), targets({1}, 3, -100).expand({2})});
}

TEST(DecomposeLosses, CrossEntropyClassIndices) {
  for (const char* reduction : {"mean", "sum", "none"}) {
    SCOPED_TRACE(reduction);
    for (double eps : {0.0, 0.1, 1.0}) {
      SCOPED_TRACE(eps);
      for (DType t : kFloatTypes) {
        SCOPED_TRACE(dtype_name(t));
        Tensor x = rnd({4, 6}, t, true);
        check_decomposition(OpId::cross_entropy,
                            {x, targets({4}, 6, -100), Str(reduction), I(-100), F(eps)});
      }
      check_decomposition(OpId::cross_entropy,
                          {rnd({2, 5, 3}), targets({2, 3}, 5, 4), Str(reduction), I(4), F(eps)});
      check_decomposition(OpId::cross_entropy,
                          {rnd({5}), targets({}, 5, 9), Str(reduction), I(9), F(eps)});
    }
  }
}

TEST(DecomposeLosses, CrossEntropyClassProbabilities) {
  for (const char* reduction : {"mean", "sum", "none"}) {
    SCOPED_TRACE(reduction);
    for (double eps : {0.0, 0.2}) {
      for (DType t : kFloatTypes) {
        SCOPED_TRACE(dtype_name(t));
        Tensor p = softmax(rnd({2, 5, 3}, t), 1);
        check_decomposition(OpId::cross_entropy,
                            {rnd({2, 5, 3}, t, true), p, Str(reduction), I(-100), F(eps)});
      }
      // The result takes the promoted dtype of input and target.
      check_decomposition(OpId::cross_entropy, {rnd({4, 6}), softmax(rnd({4, 6}, kFloat64), 1),
                                                Str(reduction), I(-1), F(eps)});
    }
  }
}

TEST(DecomposeLosses, MseLoss) {
  for (const char* reduction : {"mean", "sum", "none"}) {
    SCOPED_TRACE(reduction);
    for (DType t : kFloatTypes) {
      SCOPED_TRACE(dtype_name(t));
      check_decomposition(OpId::mse_loss, {rnd({3, 5}, t, true), rnd({3, 5}, t), Str(reduction)});
    }
    check_decomposition(OpId::mse_loss, {rnd({3, 5}), rnd({5}, kFloat64), Str(reduction)});
    check_decomposition(OpId::mse_loss, {rnd({4, 1}, kFloat16), rnd({3}), Str(reduction)});
    check_decomposition(OpId::mse_loss, {rnd({0, 2}), rnd({0, 2}), Str(reduction)});
  }
}

TEST(DecomposeAttention, Masks) {
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtype_name(t));
    Tensor q = rnd({2, 3, 4, 8}, t, true), k = rnd({2, 3, 6, 8}, t), v = rnd({2, 3, 6, 5}, t);
    check_decomposition(OpId::scaled_dot_product_attention,
                        {q, k, v, rnd({4, 6}, t), F(0), B(false), F(0.3)});
    // A bool mask with a row that excludes every key: that row attends to nothing.
    Tensor keep = rnd({3, 4, 6}, kFloat32, false, 0, 1) > 0.3;
    keep = where(tensor<bool>({true, false, true, true}, Shape{4, 1}), keep, false);
    check_decomposition(OpId::scaled_dot_product_attention, {q, k, v, keep});
  }
  // An additive mask of -inf, float32 under float16 scores.
  Tensor q = rnd({5, 4}, kFloat16);
  Tensor additive = where(rnd({5, 7}) > 0, zeros({5, 7}), -std::numeric_limits<double>::infinity());
  check_decomposition(OpId::scaled_dot_product_attention,
                      {q, rnd({7, 4}, kFloat16), rnd({7, 3}, kFloat16), additive});
}

// Attention with dropout decomposes into rand and pointwise ops: compiled, with the same seed, it
// keeps the eager kernel's weights (one draw per weight, in order) and scales them as it does.
TEST(DecomposeAttention, DropoutDrawsTheEagerKernelsMask) {
  for (DType t : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(t));
    Tensor q = rnd({2, 3, 5, 8}, t), k = rnd({2, 3, 7, 8}, t), v = rnd({2, 3, 7, 4}, t);
    Tensor mask = rnd({5, 7}, kFloat32, false, 0, 1) > 0.2;
    for (bool causal : {false, true}) {
      SCOPED_TRACE(causal ? "causal" : "mask");
      auto f = compile([causal, mask](const Tensor& a, const Tensor& b, const Tensor& c) {
        return scaled_dot_product_attention(a, b, c, causal ? Tensor() : mask, 0.4, causal);
      });
      manual_seed(11);
      Tensor want = scaled_dot_product_attention(q, k, v, causal ? Tensor() : mask, 0.4, causal);
      manual_seed(11);
      Tensor got = f(q, k, v);
      EXPECT_TRUE(allclose(got, want, 1e-5, 1e-6));
      EXPECT_FALSE(allclose(got, scaled_dot_product_attention(q, k, v, Tensor(), 0.0, causal), 1e-3,
                            1e-3));  // something was dropped
    }
  }
}

TEST(DecomposeAttention, BroadcastBatches) {
  Tensor q = rnd({2, 3, 4, 8}), k = rnd({1, 3, 6, 8}, kFloat32, true), v = rnd({3, 6, 5});
  check_decomposition(OpId::scaled_dot_product_attention, {q, k, v, rnd({2, 1, 4, 6})});
  check_decomposition(OpId::scaled_dot_product_attention,
                      {q, rnd({0, 8}), rnd({0, 5}), rnd({4, 0}) > 0});
}

TEST(DecomposeShape, Stack) {
  for (int64_t dim : {0, 1, 2, -1, -3}) {
    SCOPED_TRACE(dim);
    check_decomposition(
        OpId::stack,
        {std::vector<Tensor>{rnd({3, 4}), rnd({3, 4}, kFloat32, true), rnd({3, 4})}, I(dim)});
  }
  check_decomposition(OpId::stack, {std::vector<Tensor>{rnd({}), rnd({})}});
  check_decomposition(
      OpId::stack, {std::vector<Tensor>{rnd({2}, kInt32), rnd({2}, kFloat16), rnd({2}, kInt64)}});
  check_decomposition(OpId::stack, {std::vector<Tensor>{rnd({0}), rnd({0})}, I(1)});
}

}  // namespace
