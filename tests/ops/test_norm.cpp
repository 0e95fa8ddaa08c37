// softmax, log_softmax, layer_norm, rms_norm, batch_norm, group_norm against float64
// references written as plain loops over the inputs' (dtype-rounded) values.
#include <limits>

#include "testing.h"

using namespace coil;
using coil::testing::kFloatTypes;
using coil::testing::Tol;
using coil::testing::tol_for;
using coil::testing::values;

namespace {

int64_t prod(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= s[i];
  return p;
}

// ---- references --------------------------------------------------------------------------------

std::vector<double> ref_softmax(const Tensor& x, int64_t dim, bool log) {
  std::vector<double> v = values(x), out(v.size());
  if (x.dim() == 0) return {log ? 0.0 : 1.0};
  const Shape& s = x.sizes();
  const auto d = static_cast<size_t>(dim < 0 ? dim + x.dim() : dim);
  const int64_t outer = prod(s, 0, d), n = s[d], inner = prod(s, d + 1, s.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return static_cast<size_t>((o * n + k) * inner + i); };
      double mx = -INFINITY, sum = 0;
      for (int64_t k = 0; k < n; ++k) mx = std::max(mx, v[at(k)]);
      for (int64_t k = 0; k < n; ++k) sum += std::exp(v[at(k)] - mx);
      for (int64_t k = 0; k < n; ++k)
        out[at(k)] = log ? v[at(k)] - mx - std::log(sum) : std::exp(v[at(k)] - mx) / sum;
    }
  return out;
}

// layer_norm / rms_norm over the trailing `m` elements of each row.
std::vector<double> ref_row_norm(const Tensor& x, int64_t m, const Tensor& w, const Tensor& b,
                                 double eps, bool rms) {
  std::vector<double> v = values(x), out(v.size());
  std::vector<double> wv = w.defined() ? values(w) : std::vector<double>(m, 1.0);
  std::vector<double> bv = b.defined() ? values(b) : std::vector<double>(m, 0.0);
  for (size_t r = 0; m > 0 && r < v.size() / m; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < m; ++j) mean += v[r * m + j] / m;
    if (rms) mean = 0;
    for (int64_t j = 0; j < m; ++j) var += (v[r * m + j] - mean) * (v[r * m + j] - mean) / m;
    for (int64_t j = 0; j < m; ++j)
      out[r * m + j] = (v[r * m + j] - mean) / std::sqrt(var + eps) * wv[j] + bv[j];
  }
  return out;
}

// Per-channel mean and biased variance of x [N, C, ...].
void ref_channel_stats(const Tensor& x, std::vector<double>& mean, std::vector<double>& var) {
  std::vector<double> v = values(x);
  const int64_t n = x.size(0), c = x.size(1), s = prod(x.sizes(), 2, x.sizes().size());
  mean.assign(c, 0);
  var.assign(c, 0);
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j) mean[ch] += v[(i * c + ch) * s + j] / (n * s);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j) {
        double d = v[(i * c + ch) * s + j] - mean[ch];
        var[ch] += d * d / (n * s);
      }
  }
}

std::vector<double> ref_apply_channels(const Tensor& x, const std::vector<double>& mean,
                                       const std::vector<double>& var, const Tensor& w,
                                       const Tensor& b, double eps) {
  std::vector<double> v = values(x), out(v.size());
  const int64_t n = x.size(0), c = x.size(1), s = prod(x.sizes(), 2, x.sizes().size());
  std::vector<double> wv = w.defined() ? values(w) : std::vector<double>(c, 1.0);
  std::vector<double> bv = b.defined() ? values(b) : std::vector<double>(c, 0.0);
  for (int64_t i = 0; i < n * c; ++i)
    for (int64_t j = 0; j < s; ++j) {
      int64_t ch = i % c;
      out[i * s + j] = (v[i * s + j] - mean[ch]) / std::sqrt(var[ch] + eps) * wv[ch] + bv[ch];
    }
  return out;
}

std::vector<double> ref_group_norm(const Tensor& x, int64_t groups, const Tensor& w,
                                   const Tensor& b, double eps) {
  std::vector<double> v = values(x), out(v.size());
  const int64_t n = x.size(0), c = x.size(1), s = prod(x.sizes(), 2, x.sizes().size());
  const int64_t len = c / groups * s;
  std::vector<double> wv = w.defined() ? values(w) : std::vector<double>(c, 1.0);
  std::vector<double> bv = b.defined() ? values(b) : std::vector<double>(c, 0.0);
  for (int64_t r = 0; r < n * groups; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < len; ++j) mean += v[r * len + j] / len;
    for (int64_t j = 0; j < len; ++j)
      var += (v[r * len + j] - mean) * (v[r * len + j] - mean) / len;
    for (int64_t j = 0; j < len; ++j) {
      int64_t ch = (r % groups) * (c / groups) + j / s;
      out[r * len + j] = (v[r * len + j] - mean) / std::sqrt(var + eps) * wv[ch] + bv[ch];
    }
  }
  return out;
}

}  // namespace

// ---- softmax, log_softmax ----------------------------------------------------------------------

TEST(Softmax, MatchesReferenceOverShapesDimsDtypesAndLayouts) {
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{7}, 0},        {{7}, -1},      {{3, 5}, -1}, {{3, 5}, 0}, {{2, 1, 9}, 1}, {{4, 3, 5}, 1},
      {{4, 3, 5}, -1}, {{4, 3, 5}, 0}, {{1, 1}, -1}, {{0, 3}, 1}, {{3, 0}, 0},    {{5, 1}, 1}};
  for (DType t : kFloatTypes)
    for (const auto& [shape, dim] : cases)
      for (bool contiguous : {true, false})
        for (bool log : {false, true}) {
          SCOPED_TRACE(std::string(dtype_name(t)) + " " + shape_str(shape) + " dim " +
                       std::to_string(dim) + (contiguous ? "" : " noncontiguous") +
                       (log ? " log" : ""));
          Tensor x = coil::testing::random(shape, t, -4, 4);
          if (!contiguous) x = coil::testing::noncontiguous(x);
          Tensor y = log ? log_softmax(x, dim) : softmax(x, dim);
          EXPECT_EQ(y.dtype(), t);
          EXPECT_TRUE(y.is_contiguous());
          Tol tol = tol_for(t);
          coil::testing::expect_close(y, ref_softmax(x, dim, log), shape, tol.rtol, tol.atol);
        }
}

TEST(Softmax, LargeInnerAndParallelPaths) {
  // dim in the middle with more inner positions than one block, large enough to run threaded.
  Tensor x = coil::testing::random({3, 70, 201}, kFloat32, -5, 5);
  coil::testing::expect_close(softmax(x, 1), ref_softmax(x, 1, false), x.sizes(), 1e-5, 1e-7);
  Tensor rows = coil::testing::random({40, 1000}, kFloat64, -5, 5);
  coil::testing::expect_close(log_softmax(rows, -1), ref_softmax(rows, -1, true), rows.sizes(),
                              1e-12, 1e-12);
}

TEST(Softmax, ExtremeLogitsDoNotOverflow) {
  Tensor x = tensor<float>({1000, 1001, 1002, -1000}, Shape{4});
  const double e1 = std::exp(-1.0), e2 = std::exp(-2.0), z = 1 + e1 + e2;
  coil::testing::expect_close(softmax(x, 0), {e2 / z, e1 / z, 1 / z, 0}, {4}, 1e-6, 1e-7);
  coil::testing::expect_close(
      log_softmax(x, 0), {-2 - std::log(z), -1 - std::log(z), -std::log(z), -2002 - std::log(z)},
      {4}, 1e-6, 1e-4);
  // Masked positions (-inf) get zero probability.
  Tensor masked = tensor<float>({-INFINITY, 0, 0}, Shape{3});
  coil::testing::expect_close(softmax(masked, 0), {0, 0.5, 0.5}, {3});
  // Huge logits in half precision.
  Tensor h = tensor<float>({60000, 60000}, Shape{2}).to(kFloat16);
  coil::testing::expect_close(softmax(h, 0), {0.5, 0.5}, {2});
}

TEST(Softmax, NanPropagatesToItsRowOnly) {
  Tensor x = tensor<double>({NAN, 1, 2, 3}, Shape{2, 2});
  std::vector<double> y = values(softmax(x, 1));
  EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1]));
  EXPECT_NEAR(y[2] + y[3], 1.0, 1e-12);
}

TEST(Softmax, ZeroDimTensor) {
  Tensor x = full({}, 3.5, kFloat32);
  EXPECT_EQ(softmax(x, 0).item<double>(), 1.0);
  EXPECT_EQ(log_softmax(x, -1).item<double>(), 0.0);
  EXPECT_EQ(softmax(x, 0).dim(), 0);
}

TEST(Softmax, Errors) {
  EXPECT_COIL_ERROR(softmax(zeros({2, 3}, kInt64), 1), "i64[2, 3]");
  EXPECT_COIL_ERROR(log_softmax(zeros({2}, kBool), 0), "floating-point");
  EXPECT_COIL_ERROR(softmax(zeros({2, 3}), 2), "out of range");
  EXPECT_COIL_ERROR(log_softmax(zeros({2, 3}), -3), "dim -3");
}

// ---- layer_norm, rms_norm ----------------------------------------------------------------------

TEST(LayerNorm, MatchesReference) {
  struct Case {
    Shape shape, normalized;
  };
  const std::vector<Case> cases = {{{2, 3, 5}, {5}},   {{2, 3, 5}, {3, 5}}, {{7}, {7}},
                                   {{4, 1}, {1}},      {{0, 3}, {3}},       {{3, 2, 1}, {2, 1}},
                                   {{1, 0, 4}, {0, 4}}};
  for (DType t : kFloatTypes)
    for (const auto& c : cases)
      for (int affine = 0; affine < 3; ++affine) {  // none, weight only, weight and bias
        SCOPED_TRACE(std::string(dtype_name(t)) + " " + shape_str(c.shape) + " over " +
                     shape_str(c.normalized) + " affine " + std::to_string(affine));
        Tensor x = coil::testing::noncontiguous(coil::testing::random(c.shape, t, -3, 5));
        Tensor w = affine >= 1 ? coil::testing::random(c.normalized, t, 0.5, 2) : Tensor();
        Tensor b = affine == 2
                       ? coil::testing::noncontiguous(coil::testing::random(c.normalized, t))
                       : Tensor();
        Tensor y = layer_norm(x, c.normalized, w, b, 1e-5);
        EXPECT_EQ(y.dtype(), t);
        Tol tol = tol_for(t);
        int64_t m = prod(c.normalized, 0, c.normalized.size());
        coil::testing::expect_close(y, ref_row_norm(x, m, w, b, 1e-5, false), c.shape, tol.rtol,
                                    tol.atol * 4);
      }
}

TEST(LayerNorm, MixedParameterDtypeAndCustomEps) {
  Tensor x = coil::testing::random({3, 4}, kBFloat16);
  Tensor w = coil::testing::random({4}, kFloat32), b = coil::testing::random({4}, kFloat64);
  Tensor y = layer_norm(x, {4}, w, b, 0.5);
  EXPECT_EQ(y.dtype(), kBFloat16);
  coil::testing::expect_close(y, ref_row_norm(x, 4, w, b, 0.5, false), {3, 4}, 1.6e-2, 1.6e-2);
}

TEST(LayerNorm, Errors) {
  Tensor x = zeros({2, 3, 4});
  EXPECT_COIL_ERROR(layer_norm(x, {3}), "trailing dims of the input, got input f32[2, 3, 4]");
  EXPECT_COIL_ERROR(layer_norm(x, {2, 3, 4, 5}), "normalized_shape [2, 3, 4, 5]");
  EXPECT_COIL_ERROR(layer_norm(x, {}), "at least one dim");
  EXPECT_COIL_ERROR(layer_norm(x, {4}, zeros({3})),
                    "weight must have shape normalized_shape [4], got f32[3]");
  EXPECT_COIL_ERROR(layer_norm(x, {3, 4}, {}, zeros({4})), "bias must have shape");
  EXPECT_COIL_ERROR(layer_norm(zeros({2, 4}, kInt32), {4}), "i32[2, 4]");
  EXPECT_COIL_ERROR(layer_norm(x, {4}, zeros({4}, kInt64)), "floating-point weight");
}

TEST(RmsNorm, MatchesReference) {
  for (DType t : kFloatTypes)
    for (const Shape& shape : {Shape{3, 5}, Shape{2, 1, 7}, Shape{9}, Shape{0, 4}})
      for (bool weighted : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " " + shape_str(shape));
        Tensor x = coil::testing::noncontiguous(coil::testing::random(shape, t, -3, 3));
        Shape normalized{shape.back()};
        Tensor w = weighted ? coil::testing::random(normalized, t, 0.5, 2) : Tensor();
        Tol tol = tol_for(t);
        coil::testing::expect_close(rms_norm(x, normalized, w, 1e-6),
                                    ref_row_norm(x, shape.back(), w, {}, 1e-6, true), shape,
                                    tol.rtol, tol.atol * 4);
      }
  // Over two trailing dims.
  Tensor x = coil::testing::random({2, 3, 4}, kFloat64);
  coil::testing::expect_close(rms_norm(x, {3, 4}, {}, 1e-3),
                              ref_row_norm(x, 12, {}, {}, 1e-3, true), {2, 3, 4}, 1e-12, 1e-12);
}

TEST(RmsNorm, DefaultEpsIsTheComputeTypesMachineEpsilon) {
  // Values so small that eps dominates the mean square: the result reveals eps.
  const double feps = std::numeric_limits<float>::epsilon();
  Tensor x32 = full({4}, 1e-4, kFloat32);
  Tensor x16 = full({4}, 1e-4, kFloat32).to(kFloat16);
  for (const Tensor& x : {x32, x16}) {
    std::vector<double> v = values(x);
    double expect = v[0] / std::sqrt(v[0] * v[0] + feps);
    coil::testing::expect_close(rms_norm(x, {4}), std::vector<double>(4, expect), {4}, 2e-3);
  }
  const double deps = std::numeric_limits<double>::epsilon();
  Tensor x64 = full({2}, 1e-9, kFloat64);
  coil::testing::expect_close(rms_norm(x64, {2}),
                              std::vector<double>(2, 1e-9 / std::sqrt(1e-18 + deps)), {2}, 1e-12);
}

TEST(RmsNorm, Errors) {
  EXPECT_COIL_ERROR(rms_norm(zeros({2, 3}), {2}), "trailing dims");
  EXPECT_COIL_ERROR(rms_norm(zeros({2, 3}), {3}, zeros({2})), "weight must have shape");
  EXPECT_COIL_ERROR(rms_norm(zeros({2, 3}, kInt64), {3}), "rms_norm");
}

// ---- batch_norm --------------------------------------------------------------------------------

TEST(BatchNorm, TrainingUsesBatchStatsAndUpdatesRunningStatsInPlace) {
  for (DType t : kFloatTypes)
    for (const Shape& shape : {Shape{5, 3}, Shape{2, 3, 7}, Shape{3, 2, 3, 5}, Shape{4, 1, 2}}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + shape_str(shape));
      const int64_t c = shape[1];
      Tensor x = coil::testing::noncontiguous(coil::testing::random(shape, t, -2, 6));
      Tensor w = coil::testing::random({c}, t, 0.5, 2), b = coil::testing::random({c}, t);
      Tensor rm = coil::testing::random({c}, kFloat32),
             rv = coil::testing::random({c}, kFloat32, 0.5, 2);
      std::vector<double> rm0 = values(rm), rv0 = values(rv);
      Tensor y = batch_norm(x, w, b, rm, rv, /*training=*/true, 0.3, 1e-5);

      std::vector<double> mean, var;
      ref_channel_stats(x, mean, var);
      Tol tol = tol_for(t);
      coil::testing::expect_close(y, ref_apply_channels(x, mean, var, w, b, 1e-5), shape, tol.rtol,
                                  tol.atol * 4);
      const double count = static_cast<double>(x.numel() / c);
      std::vector<double> rm1(c), rv1(c);
      for (int64_t i = 0; i < c; ++i) {
        rm1[i] = 0.7 * rm0[i] + 0.3 * mean[i];
        rv1[i] = 0.7 * rv0[i] + 0.3 * var[i] * count / (count - 1);  // unbiased
      }
      coil::testing::expect_close(rm, rm1, {c}, 1e-5, 1e-6);
      coil::testing::expect_close(rv, rv1, {c}, 1e-5, 1e-6);
    }
}

TEST(BatchNorm, RunningStatsOfOtherDtypeAndLayoutAreUpdated) {
  Tensor x = coil::testing::random({6, 4}, kFloat32);
  Tensor storage = zeros({4, 2}, kFloat64);
  Tensor rm = storage.select(1, 0);  // strided view
  Tensor y = batch_norm(x, {}, {}, rm, {}, true, 1.0, 0);
  std::vector<double> mean, var;
  ref_channel_stats(x, mean, var);
  coil::testing::expect_close(rm, mean, {4}, 1e-6);
  coil::testing::expect_close(storage.select(1, 1), std::vector<double>(4, 0.0), {4});
}

TEST(BatchNorm, EvalUsesRunningStatsAndLeavesThem) {
  Tensor x = coil::testing::noncontiguous(coil::testing::random({3, 4, 5}, kFloat64));
  Tensor rm = coil::testing::random({4}, kFloat64),
         rv = coil::testing::random({4}, kFloat64, 0.5, 2);
  Tensor w = coil::testing::random({4}, kFloat64), b = coil::testing::random({4}, kFloat64);
  std::vector<double> rm0 = values(rm), rv0 = values(rv);
  Tensor y = batch_norm(x, w, b, rm, rv, /*training=*/false, 0.1, 1e-3);
  coil::testing::expect_close(y, ref_apply_channels(x, rm0, rv0, w, b, 1e-3), {3, 4, 5}, 1e-12,
                              1e-12);
  EXPECT_EQ(values(rm), rm0);
  EXPECT_EQ(values(rv), rv0);
  // Without weight and bias.
  coil::testing::expect_close(batch_norm(x, {}, {}, rm, rv, false),
                              ref_apply_channels(x, rm0, rv0, {}, {}, 1e-5), {3, 4, 5}, 1e-12,
                              1e-12);
}

TEST(BatchNorm, EmptyBatchLeavesRunningStats) {
  Tensor rm = zeros({3});
  Tensor y = batch_norm(zeros({0, 3, 2}), {}, {}, rm, ones({3}), true);
  EXPECT_EQ(y.sizes(), (Shape{0, 3, 2}));
  EXPECT_EQ(values(rm), std::vector<double>(3, 0.0));
}

TEST(BatchNorm, Errors) {
  Tensor x = zeros({4, 3, 2});
  EXPECT_COIL_ERROR(batch_norm(x, {}, {}, {}, {}, false), "required in eval mode");
  EXPECT_COIL_ERROR(batch_norm(x, {}, {}, zeros({3}), {}, false), "running_var");
  EXPECT_COIL_ERROR(
      batch_norm(x, zeros({4}), {}, {}, {}, true),
      "weight must hold one value per channel (3 for input f32[4, 3, 2]), got f32[4]");
  EXPECT_COIL_ERROR(batch_norm(x, {}, {}, zeros({2}), zeros({3}), true), "running_mean");
  EXPECT_COIL_ERROR(batch_norm(zeros({1, 3}), {}, {}, {}, {}, true),
                    "more than 1 value per channel");
  EXPECT_COIL_ERROR(batch_norm(zeros({3}), {}, {}, {}, {}, true), "at least 2 dims");
  EXPECT_COIL_ERROR(batch_norm(zeros({2, 3}, kInt64), {}, {}, {}, {}, true), "i64[2, 3]");
  EXPECT_COIL_ERROR(batch_norm(x, {}, {}, zeros({3}, kInt64), zeros({3}), false), "running_mean");
}

TEST(Norms, LargeInputsTakeTheThreadedPaths) {
  Tensor x = coil::testing::random({64, 600}, kFloat32, -2, 3);
  Tensor w = coil::testing::random({600}, kFloat32), b = coil::testing::random({600}, kFloat32);
  coil::testing::expect_close(layer_norm(x, {600}, w, b), ref_row_norm(x, 600, w, b, 1e-5, false),
                              x.sizes(), 1e-5, 1e-5);
  coil::testing::expect_close(rms_norm(x, {600}, w, 1e-5), ref_row_norm(x, 600, w, {}, 1e-5, true),
                              x.sizes(), 1e-5, 1e-5);
  Tensor y = x.view({8, 8, 600});
  std::vector<double> mean, var;
  ref_channel_stats(y, mean, var);
  coil::testing::expect_close(batch_norm(y, {}, {}, {}, {}, true),
                              ref_apply_channels(y, mean, var, {}, {}, 1e-5), y.sizes(), 1e-5,
                              1e-5);
  coil::testing::expect_close(group_norm(y, 4), ref_group_norm(y, 4, {}, {}, 1e-5), y.sizes(), 1e-5,
                              1e-5);
}

// ---- group_norm --------------------------------------------------------------------------------

TEST(GroupNorm, MatchesReference) {
  struct Case {
    Shape shape;
    int64_t groups;
  };
  const std::vector<Case> cases = {{{2, 6, 5}, 3}, {{3, 4}, 2},    {{2, 4, 3, 3}, 4},
                                   {{1, 5, 7}, 1}, {{2, 3, 1}, 3}, {{0, 4, 2}, 2}};
  for (DType t : kFloatTypes)
    for (const auto& c : cases)
      for (bool affine : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " " + shape_str(c.shape) + " groups " +
                     std::to_string(c.groups));
        Tensor x = coil::testing::noncontiguous(coil::testing::random(c.shape, t, -2, 4));
        Tensor w = affine ? coil::testing::random({c.shape[1]}, t, 0.5, 2) : Tensor();
        Tensor b = affine ? coil::testing::random({c.shape[1]}, t) : Tensor();
        Tensor y = group_norm(x, c.groups, w, b, 1e-4);
        EXPECT_EQ(y.dtype(), t);
        Tol tol = tol_for(t);
        coil::testing::expect_close(y, ref_group_norm(x, c.groups, w, b, 1e-4), c.shape, tol.rtol,
                                    tol.atol * 4);
      }
}

TEST(GroupNorm, Errors) {
  Tensor x = zeros({2, 6, 3});
  EXPECT_COIL_ERROR(group_norm(x, 4),
                    "channels (6 in input f32[2, 6, 3]) must be divisible by num_groups (4)");
  EXPECT_COIL_ERROR(group_norm(x, 0), "num_groups (0)");
  EXPECT_COIL_ERROR(group_norm(x, 3, zeros({3})), "weight must have shape [6]");
  EXPECT_COIL_ERROR(group_norm(x, 3, {}, zeros({6, 1})), "bias must have shape [6]");
  EXPECT_COIL_ERROR(group_norm(zeros({6}), 3), "at least 2 dims");
  EXPECT_COIL_ERROR(group_norm(zeros({2, 6}, kInt32), 3), "i32[2, 6]");
}
