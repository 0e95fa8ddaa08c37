// Decompositions of the composite reductions, softmax, the normalisation layers and gelu/silu
// against their eager kernels: every float dtype, strided inputs, keepdim and dim variants,
// size-1, odd and empty dims, and the non-finite rows eager gives special answers for.
#include <limits>

#include "decomp_testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(DecomposeReductions, Mean) {
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtype_name(t));
    check_decomposition(OpId::mean, {rnd({3, 5, 7}, t, true), L({0, 2}), B(true)});
    check_decomposition(OpId::mean, {rnd({3, 5, 7}, t), L({-1})});
    check_decomposition(OpId::mean, {rnd({5, 1}, t, true)});  // all dims
  }
  check_decomposition(OpId::mean, {rnd({}), L({0}), B(true)});  // 0-dim
  check_decomposition(OpId::mean, {rnd({0, 3}), L({0})});       // empty: nan
}

TEST(DecomposeReductions, Std) {
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtype_name(t));
    check_decomposition(OpId::std, {rnd({4, 7}, t, true), L({1}), F(0), B(true)});
    check_decomposition(OpId::std, {rnd({3, 1, 5}, t), L({0, 2}), F(1)});
  }
  check_decomposition(OpId::std, {rnd({6}), L({}), F(2)});
  check_decomposition(OpId::std, {rnd({1, 3}), L({0})});  // one value, correction 1: nan
}

TEST(DecomposeReductions, Logsumexp) {
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtype_name(t));
    check_decomposition(OpId::logsumexp, {rnd({3, 5, 7}, t, true), L({1}), B(true)});
    check_decomposition(OpId::logsumexp, {rnd({3, 5, 7}, t), L({0, -1})});
  }
  check_decomposition(OpId::logsumexp, {rnd({4, 6}, kInt64, false, -5, 5), L({1})});  // float32
  check_decomposition(OpId::logsumexp, {rnd({}), L({})});
  check_decomposition(OpId::logsumexp, {rnd({2, 0, 3}), L({1})});  // empty: -inf
  check_decomposition(OpId::logsumexp, {rnd({2, 0, 3}), L({2}), B(true)});
  // Rows of -inf give -inf, rows holding inf give inf, a nan row nan.
  Tensor x = tensor<float>({-kInf, -kInf, -kInf, 1, kInf, 2, -kInf, 3, 0, NAN, 1, 2}, Shape{4, 3});
  check_decomposition(OpId::logsumexp, {x, L({1})});
  check_decomposition(OpId::logsumexp, {x.to(kFloat16), L({1}), B(true)});
}

TEST(DecomposeSoftmax, SoftmaxAndLogSoftmax) {
  for (OpId op : {OpId::softmax, OpId::log_softmax}) {
    SCOPED_TRACE(op_name(op));
    for (DType t : kFloatTypes) {
      SCOPED_TRACE(dtype_name(t));
      check_decomposition(op, {rnd({3, 5, 7}, t, true), I(1)});
      check_decomposition(op, {rnd({3, 5, 7}, t), I(-1)});
      check_decomposition(op, {rnd({5, 1}, t), I(1)});
    }
    check_decomposition(op, {rnd({}), I(0)});
    check_decomposition(op, {rnd({2, 0}), I(1)});
    check_decomposition(op, {rnd({0, 4}), I(1)});
    check_decomposition(op, {rnd({4}, kFloat32, false, -80, 80), I(0)});  // exp would overflow
  }
}

TEST(DecomposeNorms, LayerNorm) {
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtype_name(t));
    Tensor x = rnd({2, 3, 5}, t, true);
    check_decomposition(OpId::layer_norm, {x, L({5}), rnd({5}, t), rnd({5}, t)});
    check_decomposition(OpId::layer_norm, {x, L({3, 5}), rnd({3, 5}, t, true), None(), F(1e-3)});
    check_decomposition(OpId::layer_norm, {x, L({2, 3, 5})});
  }
  // Parameters of another dtype promote, and the result is cast back to the input's.
  check_decomposition(OpId::layer_norm, {rnd({4, 6}), L({6}), rnd({6}, kFloat64), None()});
  check_decomposition(OpId::layer_norm, {rnd({4, 1}), L({1})});
}

TEST(DecomposeNorms, RmsNorm) {
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtype_name(t));
    Tensor x = rnd({3, 4, 5}, t, true, -1e-3, 1e-3);  // small values: the default eps matters
    check_decomposition(OpId::rms_norm, {x, L({5}), rnd({5}, t)});
    check_decomposition(OpId::rms_norm, {x, L({4, 5}), None(), F(1e-2)});
  }
}

TEST(DecomposeNorms, BatchNormEval) {
  Tensor c = rnd({3}), var = rnd({3}, kFloat32, false, 0.5, 2);
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtype_name(t));
    check_decomposition(OpId::batch_norm, {rnd({2, 3, 4, 5}, t, true), c, c, c, var, B(false)});
    check_decomposition(OpId::batch_norm, {rnd({5, 3}, t), None(), None(), c, var, B(false)});
  }
  // Statistics of another dtype or shape (any 3 values), weight without bias.
  check_decomposition(OpId::batch_norm, {rnd({2, 3, 4}), c, None(), c.to(kFloat16),
                                         var.to(kFloat64).view({3, 1}), B(false), F(0.1), F(1e-3)});
}

TEST(DecomposeNorms, BatchNormTrainingWithoutRunningStats) {
  Tensor c = rnd({3});
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtype_name(t));
    check_decomposition(OpId::batch_norm,
                        {rnd({2, 3, 4, 5}, t, true), c, c, None(), None(), B(true)});
    check_decomposition(OpId::batch_norm, {rnd({5, 3}, t), None(), c, None(), None(), B(true)});
  }
}

TEST(DecomposeNorms, GroupNorm) {
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtype_name(t));
    Tensor x = rnd({2, 6, 3, 5}, t, true);
    check_decomposition(OpId::group_norm, {x, I(3), rnd({6}, t), rnd({6}, t)});
    check_decomposition(OpId::group_norm, {x, I(1)});
    check_decomposition(OpId::group_norm, {rnd({3, 6, 7}, t), I(6), None(), rnd({6}, t), F(1e-2)});
  }
  check_decomposition(OpId::group_norm, {rnd({4, 3}), I(3), rnd({3})});
}

TEST(DecomposeActivations, GeluAndSilu) {
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtype_name(t));
    Tensor x = rnd({3, 5, 7}, t, true, -6, 6);
    check_decomposition(OpId::gelu, {x});
    check_decomposition(OpId::gelu, {x, Str("tanh")});
    check_decomposition(OpId::silu, {x});
  }
  // Integers compute in float32.
  Tensor ints = rnd({9}, kInt32, false, -5, 5);
  check_decomposition(OpId::gelu, {ints});
  check_decomposition(OpId::gelu, {ints, Str("tanh")});
  check_decomposition(OpId::silu, {ints});
  check_decomposition(OpId::silu, {rnd({})});
}

}  // namespace
