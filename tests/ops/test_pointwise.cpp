// Pointwise ops against float64 references computed here with <cmath>, over every dtype,
// awkward shapes, non-contiguous layouts, broadcasting and plain-number operands.
#include <cmath>
#include <functional>

#include <coil/cuda.h>

#include "testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

const std::vector<Shape> kShapes = {{}, {1}, {7}, {3, 1, 5}, {2, 3, 4}, {0, 3}, {33, 17}};

// The value x takes after rounding to dtype t (references start from the same inputs).
std::vector<double> inputs_of(const Tensor& t) { return values(t); }

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
  double lo, hi;
};

double ref_gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double ref_gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> cases = {
      {"neg", [](const Tensor& x) { return neg(x); }, [](double x) { return -x; }, -3, 3},
      {"abs", [](const Tensor& x) { return abs(x); }, [](double x) { return std::fabs(x); }, -3, 3},
      {"sign", [](const Tensor& x) { return sign(x); },
       [](double x) { return double((0 < x) - (x < 0)); }, -3, 3},
      {"exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }, -3, 3},
      {"exp2", [](const Tensor& x) { return exp2(x); }, [](double x) { return std::exp2(x); }, -3,
       3},
      {"expm1", [](const Tensor& x) { return expm1(x); }, [](double x) { return std::expm1(x); },
       -1, 1},
      {"log", [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); }, 0.1, 5},
      {"log2", [](const Tensor& x) { return log2(x); }, [](double x) { return std::log2(x); }, 0.1,
       5},
      {"log1p", [](const Tensor& x) { return log1p(x); }, [](double x) { return std::log1p(x); },
       -0.5, 3},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }, 0,
       5},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); },
       0.1, 5},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }, [](double x) { return 1 / x; },
       0.5, 5},
      {"sin", [](const Tensor& x) { return sin(x); }, [](double x) { return std::sin(x); }, -4, 4},
      {"cos", [](const Tensor& x) { return cos(x); }, [](double x) { return std::cos(x); }, -4, 4},
      {"tan", [](const Tensor& x) { return tan(x); }, [](double x) { return std::tan(x); }, -1, 1},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); }, -3,
       3},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); },
       [](double x) { return 1 / (1 + std::exp(-x)); }, -5, 5},
      {"relu", [](const Tensor& x) { return relu(x); }, [](double x) { return x > 0 ? x : 0; }, -3,
       3},
      {"gelu", [](const Tensor& x) { return gelu(x); }, ref_gelu, -3, 3},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); }, ref_gelu_tanh, -3, 3},
      {"silu", [](const Tensor& x) { return silu(x); },
       [](double x) { return x / (1 + std::exp(-x)); }, -5, 5},
      {"erf", [](const Tensor& x) { return erf(x); }, [](double x) { return std::erf(x); }, -2, 2},
      {"floor", [](const Tensor& x) { return floor(x); }, [](double x) { return std::floor(x); },
       -3, 3},
      {"ceil", [](const Tensor& x) { return ceil(x); }, [](double x) { return std::ceil(x); }, -3,
       3},
      {"round", [](const Tensor& x) { return round(x); },
       [](double x) { return std::nearbyint(x); }, -3, 3},
      {"trunc", [](const Tensor& x) { return trunc(x); }, [](double x) { return std::trunc(x); },
       -3, 3},
  };
  return cases;
}

}  // namespace

TEST(Pointwise, UnaryFloatingMatchesReference) {
  manual_seed(1);
  for (const auto& c : unary_cases()) {
    for (DType t : kFloatTypes) {
      for (const Shape& s : kShapes) {
        for (bool strided : {false, true}) {
          SCOPED_TRACE(std::string(c.name) + " " + dtype_name(t) + " " + shape_str(s) +
                       (strided ? " non-contiguous" : ""));
          Tensor x = random(s, t, c.lo, c.hi);
          if (strided) x = noncontiguous(x);
          Tensor y = c.op(x);
          EXPECT_EQ(y.dtype(), t);
          std::vector<double> expected;
          for (double v : inputs_of(x)) expected.push_back(c.ref(v));
          // The reference is exact; the result is rounded to t once (plus 16-bit compute noise).
          double rtol = t == kFloat64 ? 1e-12 : t == kFloat32 ? 2e-6 : rtol_for(t) * 2;
          expect_close(y, expected, s, rtol, t == kFloat64 ? 1e-12 : rtol);
          if (HasFailure()) return;
        }
      }
    }
  }
}

TEST(Pointwise, UnaryOnIntegersPromotesMathOpsToFloat) {
  Tensor x = tensor(std::vector<int64_t>{1, 2, 3});
  EXPECT_EQ(exp(x).dtype(), kFloat32);
  EXPECT_EQ(sqrt(x).dtype(), kFloat32);
  expect_close(sqrt(x), {1, std::sqrt(2.0), std::sqrt(3.0)}, {3});
  EXPECT_EQ(abs(tensor(std::vector<int32_t>{-2, 3})).dtype(), kInt32);
  expect_close(abs(tensor(std::vector<int32_t>{-2, 3})), {2, 3}, {2}, 0, 0);
  expect_close(neg(tensor(std::vector<int8_t>{-2, 3})), {2, -3}, {2}, 0, 0);
  expect_close(floor(tensor(std::vector<int64_t>{-2, 3})), {-2, 3}, {2}, 0, 0);
  expect_close(sign(tensor(std::vector<int64_t>{-7, 0, 9})), {-1, 0, 1}, {3}, 0, 0);
  expect_close(relu(tensor(std::vector<int32_t>{-7, 0, 9})), {0, 0, 9}, {3}, 0, 0);
  EXPECT_EQ(sin(full({2}, true)).dtype(), kFloat32);
}

TEST(Pointwise, Predicates) {
  Tensor x = tensor(std::vector<float>{0.f, NAN, INFINITY, -INFINITY, 2.f});
  expect_close(isnan(x), {0, 1, 0, 0, 0}, {5}, 0, 0);
  expect_close(isinf(x), {0, 0, 1, 1, 0}, {5}, 0, 0);
  expect_close(logical_not(x), {1, 0, 0, 0, 0}, {5}, 0, 0);
  EXPECT_EQ(isnan(x).dtype(), kBool);
  EXPECT_EQ(isnan(arange(3)).dtype(), kBool);
  expect_close(isnan(arange(3)), {0, 0, 0}, {3}, 0, 0);
}

TEST(Pointwise, RoundIsHalfToEven) {
  expect_close(round(tensor(std::vector<double>{0.5, 1.5, 2.5, -0.5, -1.5})), {0, 2, 2, -0, -2},
               {5}, 0, 0);
}

TEST(Pointwise, UnaryErrors) {
  EXPECT_COIL_ERROR(neg(full({2}, true)), "logical_not");
  EXPECT_COIL_ERROR(gelu(ones({2}), "fast"), "approximate");
  EXPECT_COIL_ERROR(sin(Tensor()), "undefined");
}

// ---- binary ----------------------------------------------------------------------------------

namespace {
struct BinaryCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<double(double, double)> ref;
  bool bool_result;
};

double py_mod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

const std::vector<BinaryCase>& binary_cases() {
  static const std::vector<BinaryCase> cases = {
      {"add", [](auto& a, auto& b) { return add(a, b); }, [](double a, double b) { return a + b; },
       false},
      {"sub", [](auto& a, auto& b) { return sub(a, b); }, [](double a, double b) { return a - b; },
       false},
      {"mul", [](auto& a, auto& b) { return mul(a, b); }, [](double a, double b) { return a * b; },
       false},
      {"div", [](auto& a, auto& b) { return div(a, b); }, [](double a, double b) { return a / b; },
       false},
      {"floor_divide", [](auto& a, auto& b) { return floor_divide(a, b); },
       [](double a, double b) { return std::floor(a / b); }, false},
      {"div_trunc", [](auto& a, auto& b) { return div(a, b, "trunc"); },
       [](double a, double b) { return std::trunc(a / b); }, false},
      {"remainder", [](auto& a, auto& b) { return remainder(a, b); }, py_mod, false},
      {"pow", [](auto& a, auto& b) { return pow(abs(a), b); },
       [](double a, double b) { return std::pow(std::fabs(a), b); }, false},
      {"maximum", [](auto& a, auto& b) { return maximum(a, b); },
       [](double a, double b) { return std::max(a, b); }, false},
      {"minimum", [](auto& a, auto& b) { return minimum(a, b); },
       [](double a, double b) { return std::min(a, b); }, false},
      {"atan2", [](auto& a, auto& b) { return atan2(a, b); },
       [](double a, double b) { return std::atan2(a, b); }, false},
      {"eq", [](auto& a, auto& b) { return eq(a, b); },
       [](double a, double b) { return double(a == b); }, true},
      {"ne", [](auto& a, auto& b) { return ne(a, b); },
       [](double a, double b) { return double(a != b); }, true},
      {"lt", [](auto& a, auto& b) { return lt(a, b); },
       [](double a, double b) { return double(a < b); }, true},
      {"le", [](auto& a, auto& b) { return le(a, b); },
       [](double a, double b) { return double(a <= b); }, true},
      {"gt", [](auto& a, auto& b) { return gt(a, b); },
       [](double a, double b) { return double(a > b); }, true},
      {"ge", [](auto& a, auto& b) { return ge(a, b); },
       [](double a, double b) { return double(a >= b); }, true},
      {"logical_and", [](auto& a, auto& b) { return logical_and(a, b); },
       [](double a, double b) { return double(a != 0 && b != 0); }, true},
      {"logical_or", [](auto& a, auto& b) { return logical_or(a, b); },
       [](double a, double b) { return double(a != 0 || b != 0); }, true},
  };
  return cases;
}

// Pairs of broadcastable shapes and their result.
const std::vector<std::array<Shape, 3>> kBroadcasts = {
    {Shape{}, Shape{}, Shape{}},
    {Shape{5}, Shape{5}, Shape{5}},
    {Shape{3, 1}, Shape{4}, Shape{3, 4}},
    {Shape{2, 1, 4}, Shape{3, 1}, Shape{2, 3, 4}},
    {Shape{1}, Shape{2, 3}, Shape{2, 3}},
    {Shape{0, 3}, Shape{3}, Shape{0, 3}},
    {Shape{17, 33}, Shape{17, 1}, Shape{17, 33}},
};

std::vector<double> broadcast_ref(const std::vector<double>& a, const Shape& sa,
                                  const std::vector<double>& b, const Shape& sb, const Shape& out,
                                  const std::function<double(double, double)>& f) {
  auto at = [&](const std::vector<double>& v, const Shape& s, const Shape& idx) {
    int64_t off = 0;
    size_t lead = idx.size() - s.size();
    for (size_t d = 0; d < s.size(); ++d) off = off * s[d] + (s[d] == 1 ? 0 : idx[lead + d]);
    return v[static_cast<size_t>(off)];
  };
  std::vector<double> r;
  int64_t n = 1;
  for (int64_t s : out) n *= s;
  for (int64_t i = 0; i < n; ++i) {
    Shape idx = unravel(i, out);
    r.push_back(f(at(a, sa, idx), at(b, sb, idx)));
  }
  return r;
}
}  // namespace

TEST(Pointwise, BinaryFloatingBroadcastMatchesReference) {
  manual_seed(2);
  for (const auto& c : binary_cases()) {
    for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
      for (const auto& [sa, sb, so] : kBroadcasts) {
        SCOPED_TRACE(std::string(c.name) + " " + dtype_name(t) + " " + shape_str(sa) + " " +
                     shape_str(sb));
        Tensor a = noncontiguous(random(sa, t, -3, 3));
        Tensor b = random(sb, t, 0.5, 3);
        Tensor y = c.op(a, b);
        EXPECT_EQ(y.dtype(), c.bool_result ? kBool : t);
        auto expected = broadcast_ref(values(a), sa, values(b), sb, so, c.ref);
        double tol = c.bool_result   ? 0
                     : t == kFloat64 ? 1e-12
                     : t == kFloat32 ? 2e-6
                                     : 2 * rtol_for(t);
        expect_close(y, expected, so, tol, tol);
        if (HasFailure()) return;
      }
    }
  }
}

TEST(Pointwise, BinaryIntegersAreExact) {
  Tensor a = tensor(std::vector<int64_t>{-7, -6, 5, 9, 0, 3}, Shape{2, 3});
  Tensor b = tensor(std::vector<int64_t>{2, -4, 3});
  expect_close(floor_divide(a, b), {-4, 1, 1, 4, 0, 1}, {2, 3}, 0, 0);
  expect_close(div(a, b, "trunc"), {-3, 1, 1, 4, 0, 1}, {2, 3}, 0, 0);
  expect_close(remainder(a, b), {1, -2, 2, 1, 0, 0}, {2, 3}, 0, 0);
  expect_close(pow(a, 2), {49, 36, 25, 81, 0, 9}, {2, 3}, 0, 0);
  EXPECT_EQ(div(a, b).dtype(), kFloat32);  // true division of integers is floating
  expect_close(div(a, b), {-3.5, 1.5, 5.0 / 3.0, 4.5, 0, 1}, {2, 3});
  EXPECT_EQ((a + a).dtype(), kInt64);
  // int64 arithmetic beyond float precision stays exact.
  Tensor big = full({1}, int64_t{1} << 60);
  EXPECT_EQ((big + 1).item<int64_t>(), (int64_t{1} << 60) + 1);
}

TEST(Pointwise, TypePromotionWithTensorsAndNumbers) {
  Tensor i32 = ones({2}, kInt32), i64 = ones({2}, kInt64), f16 = ones({2}, kFloat16);
  Tensor f64 = ones({2}, kFloat64), b = ones({2}, kBool), u8 = ones({2}, kUInt8);
  EXPECT_EQ((i32 + i64).dtype(), kInt64);
  EXPECT_EQ((i32 + f16).dtype(), kFloat16);
  EXPECT_EQ((f16 + f64).dtype(), kFloat64);
  EXPECT_EQ((b + b).dtype(), kBool);
  EXPECT_EQ((b + u8).dtype(), kUInt8);
  EXPECT_EQ((u8 + ones({2}, kInt8)).dtype(), kInt32);  // coil has no int16
  EXPECT_EQ((f16 + ones({2}, kBFloat16)).dtype(), kFloat32);
  // Plain numbers only raise the category, never the width.
  EXPECT_EQ((i32 + 1).dtype(), kInt32);
  EXPECT_EQ((i32 * 0.5).dtype(), kFloat32);
  EXPECT_EQ((f16 * 2.5).dtype(), kFloat16);
  EXPECT_EQ((b + 1).dtype(), kInt64);
  EXPECT_EQ((u8 + 300).dtype(), kUInt8);
  // Zero-dim tensors behave like numbers of their dtype.
  EXPECT_EQ((i32 + scalar_tensor(int64_t{5})).dtype(), kInt32);
  EXPECT_EQ((i32 + scalar_tensor(2.0, kFloat64)).dtype(), kFloat64);
  EXPECT_EQ((f16 + scalar_tensor(2.0, kFloat64)).dtype(), kFloat16);
  EXPECT_EQ((scalar_tensor(1) + scalar_tensor(2.0)).dtype(), kFloat32);
  // Comparisons compute in the promoted type.
  expect_close(tensor(std::vector<int64_t>{1, 2}) < 1.5, {1, 0}, {2}, 0, 0);
}

TEST(Pointwise, NumbersOnEitherSide) {
  Tensor x = tensor(std::vector<float>{1, 2, 4});
  expect_close(2.0 - x, {1, 0, -2}, {3});
  expect_close(1 / x, {1, 0.5, 0.25}, {3});
  expect_close(x * 0.5, {0.5, 1, 2}, {3});
  expect_close(pow(2, x), {2, 4, 16}, {3});
  expect_close(x.pow(2), {1, 4, 16}, {3});
  expect_close(maximum(x, 2), {2, 2, 4}, {3});
}

TEST(Pointwise, NanPropagation) {
  Tensor x = tensor(std::vector<float>{NAN, 1}), y = tensor(std::vector<float>{0, NAN});
  auto v = values(maximum(x, y));
  EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]));
  v = values(minimum(x, y));
  EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]));
  v = values(clamp(x, 0, 0.5));
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], 0.5);
}

TEST(Pointwise, BinaryErrors) {
  EXPECT_COIL_ERROR(ones({2, 3}) + ones({4}), "cannot be broadcast");
  EXPECT_COIL_ERROR(full({2}, true) - full({2}, true), "sub");
  EXPECT_COIL_ERROR(floor_divide(arange(3), 0), "division by zero");
  EXPECT_COIL_ERROR(remainder(arange(3), 0), "division by zero");
  EXPECT_COIL_ERROR(pow(arange(3), -1), "negative integer powers");
  EXPECT_COIL_ERROR(div(ones({2}), ones({2}), "round"), "rounding_mode");
  if (!cuda::is_available()) {
    EXPECT_COIL_ERROR(ones({2}, kFloat32, Device("cuda")), "cuda");
  }
}

TEST(Pointwise, WhereBroadcastsAndPromotes) {
  Tensor c = tensor(std::vector<bool>{true, false, true});
  Tensor a = tensor(std::vector<int64_t>{1, 2, 3});
  Tensor y = where(c, a, 0.5);
  EXPECT_EQ(y.dtype(), kFloat32);
  expect_close(y, {1, 0.5, 3}, {3});
  Tensor m = where(c.view({3, 1}), ones({1, 2}), zeros({3, 2}));
  expect_close(m, {1, 1, 0, 0, 1, 1}, {3, 2});
  EXPECT_COIL_ERROR(where(a, a, a), "bool");
}

TEST(Pointwise, Clamp) {
  Tensor x = tensor(std::vector<float>{-2, -0.5, 0.5, 2});
  expect_close(clamp(x, -1, 1), {-1, -0.5, 0.5, 1}, {4});
  expect_close(clamp_min(x, 0), {0, 0, 0.5, 2}, {4});
  expect_close(clamp_max(x, 0), {-2, -0.5, 0, 0}, {4});
  EXPECT_EQ(clamp(arange(4), 1, 2).dtype(), kInt64);
  EXPECT_EQ(clamp(arange(4), 0.5, 2).dtype(), kFloat32);
  EXPECT_COIL_ERROR(clamp(x, std::nullopt, std::nullopt), "at least one");
}

TEST(Pointwise, CastsAndCopies) {
  Tensor x = tensor(std::vector<float>{-1.5f, 0.f, 2.7f, 300.f});
  expect_close(x.to(kInt32), {-1, 0, 2, 300}, {4}, 0, 0);
  expect_close(x.to(kBool), {1, 0, 1, 1}, {4}, 0, 0);
  expect_close(x.to(kFloat16), {-1.5, 0, 2.69921875, 300}, {4}, 0, 0);
  expect_close(x.to(kBFloat16), {-1.5, 0, 2.703125, 300}, {4}, 0, 0);
  Tensor nc = noncontiguous(random({3, 4}));
  EXPECT_FALSE(nc.is_contiguous());
  Tensor c = nc.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_TRUE(equal(c, nc));
  Tensor same = c.contiguous();
  EXPECT_TRUE(same.is_same(c));  // contiguous of a contiguous tensor is itself
  Tensor cl = c.clone();
  EXPECT_FALSE(cl.shares_storage(c));
  EXPECT_TRUE(equal(cl, c));
}

TEST(Pointwise, HalfConversionRoundsToNearestEven) {
  EXPECT_EQ(float(Half(65504.f)), 65504.f);
  EXPECT_TRUE(std::isinf(float(Half(65520.f))));
  EXPECT_EQ(float(Half(1.0f + 1.0f / 2048)), 1.0f);                // tie: down to even
  EXPECT_EQ(float(Half(1.0f + 3.0f / 2048)), 1.0f + 2.0f / 1024);  // tie: up to even
  EXPECT_EQ(float(Half(5.9604645e-8f)), 5.9604645e-8f);            // smallest subnormal
  EXPECT_TRUE(std::isnan(float(Half(NAN))));
  EXPECT_EQ(float(BFloat16(1.0f + 1.0f / 256)), 1.0f);  // tie to even
}

TEST(Pointwise, InPlace) {
  Tensor x = tensor(std::vector<float>{1, 2, 3});
  Tensor view = x.slice(0, 1, std::nullopt);
  view.mul_(10);
  expect_close(x, {1, 20, 30}, {3});
  x.add_(ones({3})).sub_(1).div_(2);
  expect_close(x, {0.5, 10, 15}, {3});
  x.clamp_(1, 12).relu_();
  expect_close(x, {1, 10, 12}, {3});
  x.zero_();
  expect_close(x, {0, 0, 0}, {3});
  Tensor i = arange(3);
  EXPECT_COIL_ERROR(i.div_(2), "cannot be stored");
  EXPECT_COIL_ERROR(x.add_(ones({2, 3})), "in-place");
}
