// cross_entropy, nll_loss, mse_loss, and the other training-time ops embedding and dropout,
// against float64 references written as plain loops over the inputs' values.
#include "testing.h"

using namespace coil;
using coil::testing::kFloatTypes;
using coil::testing::Tol;
using coil::testing::tol_for;
using coil::testing::values;

namespace {

// Class-dim layout of a classification input: [C] -> (1, C, 1), [N, C, d...] -> (N, C, prod d).
struct Layout {
  int64_t n, c, s;
};
Layout layout_of(const Shape& shape) {
  if (shape.size() == 1) return {1, shape[0], 1};
  int64_t s = 1;
  for (size_t i = 2; i < shape.size(); ++i) s *= shape[i];
  return {shape[0], shape[1], s};
}
Shape without_class_dim(const Shape& shape) {
  Shape out = shape;
  out.erase(out.begin() + (shape.size() == 1 ? 0 : 1));
  return out;
}

// log_softmax over the class dim, computed naively but stably in double.
std::vector<double> ref_log_probs(const Tensor& x) {
  std::vector<double> v = values(x), out(v.size());
  Layout L = layout_of(x.sizes());
  for (int64_t i = 0; i < L.n; ++i)
    for (int64_t p = 0; p < L.s; ++p) {
      auto at = [&](int64_t k) { return static_cast<size_t>((i * L.c + k) * L.s + p); };
      double mx = -INFINITY, sum = 0;
      for (int64_t k = 0; k < L.c; ++k) mx = std::max(mx, v[at(k)]);
      for (int64_t k = 0; k < L.c; ++k) sum += std::exp(v[at(k)] - mx);
      for (int64_t k = 0; k < L.c; ++k) out[at(k)] = v[at(k)] - mx - std::log(sum);
    }
  return out;
}

// The loss from per-element terms: the terms (none), their sum, or sum / divisor (mean).
std::vector<double> ref_reduce(const std::vector<double>& terms, double divisor,
                               const std::string& reduction) {
  if (reduction == "none") return terms;
  double sum = 0;
  for (double v : terms) sum += v;
  return {reduction == "mean" ? sum / divisor : sum};
}

// nll over log-probabilities `lp` laid out like `shape`, with PyTorch's label smoothing.
std::vector<double> ref_class_loss(const std::vector<double>& lp, const Shape& shape,
                                   const Tensor& target, const std::string& reduction,
                                   int64_t ignore_index, double eps) {
  Layout L = layout_of(shape);
  std::vector<double> t = values(target), terms(t.size(), 0.0);
  double valid = 0;
  for (int64_t i = 0; i < L.n; ++i)
    for (int64_t p = 0; p < L.s; ++p) {
      size_t j = static_cast<size_t>(i * L.s + p);
      auto cls = static_cast<int64_t>(t[j]);
      if (cls == ignore_index) continue;
      valid += 1;
      double smooth = 0;
      for (int64_t k = 0; k < L.c; ++k) smooth -= lp[(i * L.c + k) * L.s + p] / L.c;
      terms[j] = (1 - eps) * -lp[(i * L.c + cls) * L.s + p] + eps * smooth;
    }
  return ref_reduce(terms, valid, reduction);
}

Shape reduced_shape(const Shape& unreduced, const std::string& reduction) {
  return reduction == "none" ? unreduced : Shape{};
}

}  // namespace

// ---- cross_entropy, nll_loss -------------------------------------------------------------------

TEST(CrossEntropy, ClassIndicesMatchReference) {
  const std::vector<Shape> shapes = {{5, 4}, {7}, {3, 5, 2}, {2, 3, 2, 3}, {1, 1}, {0, 4}, {4, 1}};
  for (DType t : kFloatTypes)
    for (const Shape& shape : shapes)
      for (const char* reduction : {"none", "mean", "sum"})
        for (double eps : {0.0, 0.2}) {
          SCOPED_TRACE(std::string(dtype_name(t)) + " " + shape_str(shape) + " " + reduction +
                       " label_smoothing " + std::to_string(eps));
          Layout L = layout_of(shape);
          Tensor x = coil::testing::noncontiguous(coil::testing::random(shape, t, -4, 4));
          Tensor target = coil::testing::random(without_class_dim(shape), kInt64, 0, double(L.c));
          Tensor loss = cross_entropy(x, target, reduction, -100, eps);
          EXPECT_EQ(loss.dtype(), t);
          Tol tol = tol_for(t);
          coil::testing::expect_close(
              loss, ref_class_loss(ref_log_probs(x), shape, target, reduction, -100, eps),
              reduced_shape(without_class_dim(shape), reduction), tol.rtol, tol.atol * 4);
        }
}

TEST(CrossEntropy, IgnoreIndexSkipsTargetsAndTheMeanDivisor) {
  Tensor x = coil::testing::random({6, 3}, kFloat64);
  Tensor target = tensor<int64_t>({0, 2, -100, 1, -100, 2}, Shape{6});
  for (const char* reduction : {"none", "mean", "sum"})
    for (double eps : {0.0, 0.3})
      coil::testing::expect_close(
          cross_entropy(x, target, reduction, -100, eps),
          ref_class_loss(ref_log_probs(x), {6, 3}, target, reduction, -100, eps),
          reduction == std::string("none") ? Shape{6} : Shape{}, 1e-12, 1e-12);
  // A valid class index can be the ignored one, and a non-contiguous target works.
  Tensor t2 = coil::testing::noncontiguous(tensor<int64_t>({1, 1, 0, 2, 1, 0}, Shape{6}));
  coil::testing::expect_close(cross_entropy(x, t2, "mean", 1),
                              ref_class_loss(ref_log_probs(x), {6, 3}, t2, "mean", 1, 0), {},
                              1e-12);
  // Every target ignored: the mean is 0 / 0.
  Tensor all_ignored = full({6}, -100, kInt64);
  EXPECT_TRUE(std::isnan(cross_entropy(x, all_ignored).item<double>()));
  EXPECT_EQ(cross_entropy(x, all_ignored, "sum").item<double>(), 0.0);
}

TEST(CrossEntropy, ExtremeLogitsStayFinite) {
  Tensor x = tensor<float>({1000, 0, -1000, 0, 30000, 30000}, Shape{3, 2});
  Tensor target = tensor<int64_t>({1, 0, 1}, Shape{3});
  coil::testing::expect_close(cross_entropy(x, target, "none"), {1000, 1000, std::log(2.0)}, {3},
                              1e-6);
}

TEST(CrossEntropy, ClassProbabilityTargets) {
  for (DType t : kFloatTypes)
    for (const Shape& shape : {Shape{4, 3}, Shape{5}, Shape{2, 3, 4}})
      for (const char* reduction : {"none", "mean", "sum"})
        for (double eps : {0.0, 0.25}) {
          SCOPED_TRACE(std::string(dtype_name(t)) + " " + shape_str(shape) + " " + reduction);
          Layout L = layout_of(shape);
          Tensor x = coil::testing::random(shape, t, -3, 3);
          Tensor p = coil::testing::noncontiguous(coil::testing::random(shape, t, 0, 1));
          std::vector<double> lp = ref_log_probs(x), pv = values(p), terms(L.n * L.s, 0.0);
          for (int64_t i = 0; i < L.n; ++i)
            for (int64_t k = 0; k < L.c; ++k)
              for (int64_t s = 0; s < L.s; ++s) {
                size_t j = (i * L.c + k) * L.s + s;
                terms[i * L.s + s] -= lp[j] * (pv[j] * (1 - eps) + eps / L.c);
              }
          Tol tol = tol_for(t);
          coil::testing::expect_close(cross_entropy(x, p, reduction, -100, eps),
                                      ref_reduce(terms, double(L.n * L.s), reduction),
                                      reduced_shape(without_class_dim(shape), reduction), tol.rtol,
                                      tol.atol * 4);
        }
  // The result dtype promotes with the target's.
  EXPECT_EQ(cross_entropy(zeros({2, 3}, kFloat16), zeros({2, 3}, kFloat64)).dtype(), kFloat64);
}

TEST(CrossEntropy, Errors) {
  Tensor x = zeros({4, 3});
  EXPECT_COIL_ERROR(cross_entropy(x, zeros({4}, kInt32)),
                    "int64 class indices as target, got i32[4]");
  EXPECT_COIL_ERROR(
      cross_entropy(x, zeros({3}, kInt64)),
      "target i64[3] does not match input f32[4, 3]; expected class indices of shape [4]");
  EXPECT_COIL_ERROR(cross_entropy(zeros({2, 3, 5}), zeros({2, 3}, kInt64)), "shape [2, 5]");
  EXPECT_COIL_ERROR(cross_entropy(x, tensor<int64_t>({0, 1, 3, 2}, Shape{4})),
                    "target 3 (at flat index 2) is out of bounds for 3 classes");
  EXPECT_COIL_ERROR(cross_entropy(x, tensor<int64_t>({0, -1, 0, 0}, Shape{4})), "target -1");
  EXPECT_COIL_ERROR(cross_entropy(x, zeros({4}, kInt64), "avg"),
                    "reduction must be \"none\", \"mean\" or \"sum\", got \"avg\"");
  EXPECT_COIL_ERROR(cross_entropy(x, zeros({4}, kInt64), "mean", -100, 1.5),
                    "label_smoothing must be in [0, 1], got 1.5");
  EXPECT_COIL_ERROR(cross_entropy(zeros({4, 3}, kInt64), zeros({4}, kInt64)), "i64[4, 3]");
  EXPECT_COIL_ERROR(cross_entropy(zeros({}), zeros({}, kInt64)), "got f32[]");
  EXPECT_COIL_ERROR(cross_entropy(x, zeros({4, 3}, kInt64)), "must be floating");
  EXPECT_COIL_ERROR(cross_entropy(x, zeros({4, 3}), "mean", 0), "ignore_index (0)");
}

TEST(NllLoss, MatchesReference) {
  for (DType t : kFloatTypes)
    for (const Shape& shape : {Shape{5, 4}, Shape{6}, Shape{3, 4, 2, 2}, Shape{0, 3}})
      for (const char* reduction : {"none", "mean", "sum"}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " " + shape_str(shape) + " " + reduction);
        Layout L = layout_of(shape);
        Tensor x = coil::testing::noncontiguous(coil::testing::random(shape, t, -5, 0));
        Tensor target = coil::testing::random(without_class_dim(shape), kInt64, 0, double(L.c));
        Tol tol = tol_for(t);
        // nll_loss reads its input as log-probabilities as they are.
        coil::testing::expect_close(nll_loss(x, target, reduction, 2),
                                    ref_class_loss(values(x), shape, target, reduction, 2, 0),
                                    reduced_shape(without_class_dim(shape), reduction), tol.rtol,
                                    tol.atol * 4);
      }
}

TEST(NllLoss, Errors) {
  EXPECT_COIL_ERROR(nll_loss(zeros({4, 3}), zeros({4, 1}, kInt64)),
                    "expected class indices of shape [4]");
  EXPECT_COIL_ERROR(nll_loss(zeros({4, 3}), full({4}, 5, kInt64)), "target 5");
  EXPECT_COIL_ERROR(nll_loss(zeros({4, 3}), zeros({4}), "sum"), "int64 class indices");
  EXPECT_COIL_ERROR(nll_loss(zeros({4, 3}), zeros({4}, kInt64), "total"), "\"total\"");
  EXPECT_COIL_ERROR(nll_loss(zeros({4, 3}, kInt32), zeros({4}, kInt64)), "floating-point input");
}

// ---- mse_loss ----------------------------------------------------------------------------------

TEST(MseLoss, MatchesReferenceWithBroadcastingAndPromotion) {
  struct Case {
    Shape a, b, out;
  };
  const std::vector<Case> cases = {{{3, 5}, {3, 5}, {3, 5}},
                                   {{3, 1}, {4}, {3, 4}},
                                   {{2, 1, 3}, {1, 4, 1}, {2, 4, 3}},
                                   {{}, {7}, {7}},
                                   {{0, 2}, {0, 2}, {0, 2}}};
  for (DType t : kFloatTypes)
    for (const auto& c : cases)
      for (const char* reduction : {"none", "mean", "sum"}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " " + shape_str(c.a) + " vs " + shape_str(c.b) +
                     " " + reduction);
        Tensor a = coil::testing::noncontiguous(coil::testing::random(c.a, t));
        Tensor b = coil::testing::random(c.b, t);
        std::vector<double> av = values(a), bv = values(b), terms;
        int64_t numel = 1;
        for (int64_t d : c.out) numel *= d;
        for (int64_t i = 0; i < numel; ++i) {
          Shape idx = coil::testing::unravel(i, c.out);
          auto at = [&](const Shape& s) {  // row-major index into a broadcast operand
            int64_t off = 0;
            for (size_t d = 0; d < s.size(); ++d)
              off = off * s[d] + (s[d] == 1 ? 0 : idx[idx.size() - s.size() + d]);
            return static_cast<size_t>(off);
          };
          double diff = av[at(c.a)] - bv[at(c.b)];
          terms.push_back(diff * diff);
        }
        Tol tol = tol_for(t);
        Tensor loss = mse_loss(a, b, reduction);
        EXPECT_EQ(loss.dtype(), t);
        coil::testing::expect_close(loss, ref_reduce(terms, double(terms.size()), reduction),
                                    reduced_shape(c.out, reduction), tol.rtol, tol.atol * 4);
      }
  EXPECT_EQ(mse_loss(zeros({2}, kFloat32), zeros({2}, kFloat64)).dtype(), kFloat64);
  EXPECT_EQ(mse_loss(zeros({2}, kBFloat16), zeros({2}, kFloat16), "none").dtype(), kFloat32);
  EXPECT_TRUE(std::isnan(mse_loss(zeros({0}), zeros({0})).item<double>()));
}

TEST(MseLoss, Errors) {
  EXPECT_COIL_ERROR(mse_loss(zeros({2, 3}), zeros({4})), "mse_loss");
  EXPECT_COIL_ERROR(mse_loss(zeros({2}, kInt64), zeros({2}, kInt64)),
                    "expected floating-point operands, got input i64[2] and target i64[2]");
  EXPECT_COIL_ERROR(mse_loss(zeros({2}), zeros({2}), "max"), "\"max\"");
}

// ---- embedding ---------------------------------------------------------------------------------

TEST(Embedding, GathersRowsForIndicesOfAnyShape) {
  for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64}) {
    for (bool transposed : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + (transposed ? " transposed weight" : ""));
      // A transposed weight has strides (1, V): rows are not contiguous.
      Tensor w = transposed ? coil::testing::random({5, 7}, t, -9, 9).t()
                            : coil::testing::random({7, 5}, t, -9, 9);
      std::vector<double> wv = values(w);
      for (const Shape& shape : {Shape{2, 3}, Shape{}, Shape{0}, Shape{4, 1, 2}}) {
        for (DType it : {kInt64, kInt32}) {
          Tensor idx = coil::testing::noncontiguous(coil::testing::random(shape, it, 0, 7));
          std::vector<double> iv = values(idx), expect;
          for (double i : iv)
            for (int64_t j = 0; j < 5; ++j) expect.push_back(wv[static_cast<size_t>(i) * 5 + j]);
          Shape out_shape = shape;
          out_shape.push_back(5);
          Tensor y = embedding(w, idx, 3);  // padding_idx does not change the forward values
          EXPECT_EQ(y.dtype(), t);
          coil::testing::expect_close(y, expect, out_shape, 0, 0);
        }
      }
    }
  }
}

TEST(Embedding, Errors) {
  Tensor w = zeros({4, 3});
  EXPECT_COIL_ERROR(embedding(w, tensor<int64_t>({1, 4}, Shape{2})),
                    "index 4 (at flat index 1) is out of range for weight f32[4, 3] with 4 rows");
  EXPECT_COIL_ERROR(embedding(w, tensor<int64_t>({-1}, Shape{1})), "index -1");
  EXPECT_COIL_ERROR(embedding(zeros({4}), zeros({2}, kInt64)), "weight must be 2-D");
  EXPECT_COIL_ERROR(embedding(w, zeros({2})), "indices must be int64 or int32, got f32[2]");
  EXPECT_COIL_ERROR(embedding(w, zeros({2}, kInt64), 4), "padding_idx 4");
  EXPECT_COIL_ERROR(embedding(w, zeros({2}, kInt64), -2), "padding_idx -2");
}

// ---- dropout -----------------------------------------------------------------------------------

TEST(Dropout, IdentityWhenNotTrainingOrPZero) {
  Tensor x = coil::testing::noncontiguous(coil::testing::random({3, 4}));
  EXPECT_EQ(values(dropout(x, 0.5, false)), values(x));
  EXPECT_EQ(values(dropout(x, 0.0, true)), values(x));
  EXPECT_TRUE(dropout(x, 0.5, false).is_contiguous());
}

TEST(Dropout, POneGivesZeros) {
  Tensor x = coil::testing::random({5, 3}, kFloat16);
  Tensor y = dropout(x, 1.0, true);
  EXPECT_EQ(y.dtype(), kFloat16);
  for (double v : values(y)) EXPECT_EQ(v, 0.0);
}

TEST(Dropout, KeepsAboutOneMinusPScaledAndIsRepeatable) {
  const std::vector<std::pair<DType, double>> cases = {
      {kFloat32, 0.2}, {kFloat32, 0.9}, {kFloat64, 0.5}, {kFloat16, 0.5}, {kBFloat16, 0.3}};
  for (const auto& [t, p] : cases) {
    SCOPED_TRACE(std::string(dtype_name(t)) + " p " + std::to_string(p));
    Tensor x = coil::testing::noncontiguous(coil::testing::random({160, 250}, t, 1, 2));  // no 0s
    manual_seed(123);
    Tensor y = dropout(x, p, true);
    std::vector<double> xv = values(x), yv = values(y);
    int64_t kept = 0;
    for (size_t i = 0; i < xv.size(); ++i) {
      if (yv[i] == 0) continue;
      ++kept;
      EXPECT_NEAR(yv[i], xv[i] / (1 - p), coil::testing::rtol_for(t) * 2 * yv[i]) << "at " << i;
      if (::testing::Test::HasFailure()) return;
    }
    // 40000 Bernoulli draws: the kept fraction's standard deviation is at most 0.0025.
    EXPECT_NEAR(double(kept) / double(xv.size()), 1 - p, 0.015);
    manual_seed(123);
    EXPECT_EQ(values(dropout(x, p, true)), yv);
    manual_seed(124);
    EXPECT_NE(values(dropout(x, p, true)), yv);
  }
}

TEST(Dropout, EmptyAndErrors) {
  EXPECT_EQ(dropout(zeros({0, 3}), 0.5, true).sizes(), (Shape{0, 3}));
  EXPECT_COIL_ERROR(dropout(zeros({2}), 1.5, true), "p must be in [0, 1], got 1.5");
  EXPECT_COIL_ERROR(dropout(zeros({2}), -0.1, false), "got -0.1");
  EXPECT_COIL_ERROR(dropout(zeros({2}, kInt64), 0.5, true), "i64[2]");
}
