// Reductions and scans against float64 references computed by plain loops over the input's
// values: every op over shapes with size-1, odd and zero-size dims, dim sets including [] (all)
// and negative dims, keepdim both ways, contiguous and non-contiguous inputs, each dtype.
#include <algorithm>
#include <cmath>
#include <limits>

#include "testing.h"

using namespace coil;
using coil::testing::expect_close;
using coil::testing::noncontiguous;
using coil::testing::random;
using coil::testing::rtol_for;
using coil::testing::unravel;
using coil::testing::values;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The reference's view of a reduction: the output shape and, for each output element, the
// reduced values in row-major order of the reduced dims.
struct Groups {
  Shape sizes;
  std::vector<std::vector<double>> rows;
};

Groups group(const Tensor& x, Shape dims, bool keepdim) {
  int64_t nd = x.dim();
  std::vector<bool> reduced(static_cast<size_t>(nd), dims.empty());
  for (int64_t d : dims)
    if (nd > 0) reduced[static_cast<size_t>(d < 0 ? d + nd : d)] = true;
  Groups g;
  Shape kept;
  for (int64_t d = 0; d < nd; ++d) {
    if (!reduced[d]) kept.push_back(x.size(d));
    if (!reduced[d] || keepdim) g.sizes.push_back(reduced[d] ? 1 : x.size(d));
  }
  int64_t n_out = 1;
  for (int64_t s : kept) n_out *= s;
  g.rows.resize(static_cast<size_t>(n_out));
  std::vector<double> v = values(x);
  Shape idx(static_cast<size_t>(nd), 0);  // the multi-index of v[i], stepped row-major
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t o = 0, k = 0;
    for (int64_t d = 0; d < nd; ++d)
      if (!reduced[d]) o = o * kept[k++] + idx[d];
    g.rows[o].push_back(v[i]);
    for (int64_t d = nd - 1; d >= 0 && ++idx[d] == x.sizes()[d]; --d) idx[d] = 0;
  }
  return g;
}

double ref_sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}
double ref_prod(const std::vector<double>& v) {
  double s = 1;
  for (double x : v) s *= x;
  return s;
}
double ref_mean(const std::vector<double>& v) { return ref_sum(v) / static_cast<double>(v.size()); }
double ref_max(const std::vector<double>& v) {
  double m = -kInf;
  for (double x : v) m = std::isnan(x) || std::isnan(m) ? kNaN : std::max(m, x);
  return m;
}
double ref_min(const std::vector<double>& v) {
  double m = kInf;
  for (double x : v) m = std::isnan(x) || std::isnan(m) ? kNaN : std::min(m, x);
  return m;
}
double ref_var(const std::vector<double>& v, double correction) {
  double mean = ref_mean(v), m2 = 0;
  for (double x : v) m2 += (x - mean) * (x - mean);
  return m2 / std::max(0.0, static_cast<double>(v.size()) - correction);
}
double ref_logsumexp(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += std::exp(x);
  return std::log(s);
}
double ref_argmax(const std::vector<double>& v, bool is_max) {
  size_t best = 0;
  for (size_t i = 1; i < v.size() && !std::isnan(v[best]); ++i)
    if (std::isnan(v[i]) || (is_max ? v[i] > v[best] : v[i] < v[best])) best = i;
  return static_cast<double>(best);
}
double ref_any(const std::vector<double>& v) {
  return std::any_of(v.begin(), v.end(), [](double x) { return x != 0; });
}
double ref_all(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return x != 0; });
}

using Op = std::function<Tensor(const Tensor&, const Shape&, bool)>;
using Ref = std::function<double(const std::vector<double>&)>;

// Checks op(x, dims, keepdim) against ref over every group, contiguous and not.
void check(const Op& op, const Ref& ref, const Tensor& x, const Shape& dims, bool keepdim,
           DType out_dtype, double rtol, double atol = 1e-6) {
  SCOPED_TRACE(::testing::Message() << "input " << dtype_name(x.dtype()) << shape_str(x.sizes())
                                    << " dims " << shape_str(dims) << " keepdim " << keepdim);
  Groups g = group(x, dims, keepdim);
  std::vector<double> expected;
  for (const auto& row : g.rows) expected.push_back(ref(row));
  for (const Tensor& in : {x, noncontiguous(x)}) {
    Tensor y = op(in, dims, keepdim);
    EXPECT_EQ(y.dtype(), out_dtype);
    EXPECT_TRUE(y.is_contiguous());
    expect_close(y, expected, g.sizes, rtol, atol);
  }
}

struct Case {
  Shape sizes, dims;
};
// Shapes and dim sets every reduction runs on; the zero-size ones are listed separately.
const std::vector<Case> kCases = {
    {{}, {}},
    {{}, {0}},
    {{}, {-1}},
    {{1}, {}},
    {{1}, {0}},
    {{7}, {}},
    {{7}, {0}},
    {{7}, {-1}},
    {{3, 1, 5}, {}},
    {{3, 1, 5}, {0}},
    {{3, 1, 5}, {1}},
    {{3, 1, 5}, {-1}},
    {{3, 1, 5}, {0, 2}},
    {{2, 3, 4}, {}},
    {{2, 3, 4}, {0}},
    {{2, 3, 4}, {1}},
    {{2, 3, 4}, {-1}},
    {{2, 3, 4}, {0, 2}},
    {{2, 3, 4}, {2, 0, 1}},
};
// Larger: parallel loops, several blocks, gathered and lane-grouped layouts. Run for a few
// dtypes only, to keep the suite fast.
const std::vector<Case> kLargeCases = {
    {{300, 200}, {0}},      {{300, 200}, {1}}, {{17, 64, 40}, {1}},
    {{17, 64, 40}, {0, 2}}, {{70001}, {}},
};
const std::vector<Case> kEmptyCases = {
    {{0}, {}}, {{2, 0, 3}, {1}}, {{2, 0, 3}, {0}}, {{2, 0, 3}, {0, 2}}, {{0, 3}, {}}};

const std::vector<DType> kFloats = {kFloat32, kFloat64, kFloat16, kBFloat16};

// Small random integers (with ties and zeros); nonnegative for unsigned and bool.
Tensor small_ints(const Shape& sizes, DType t) {
  return random(sizes, t, t == kBool || t == kUInt8 ? 0 : -3, 3);
}

// The cases a dtype runs: the small ones, plus the zero-size and large ones when asked.
std::vector<Case> cases_for(DType t, bool with_empty, bool with_large = true) {
  std::vector<Case> cases = kCases;
  if (with_empty) cases.insert(cases.end(), kEmptyCases.begin(), kEmptyCases.end());
  bool large = t == kFloat32 || t == kBFloat16 || t == kInt32 || t == kBool;
  if (large && with_large) cases.insert(cases.end(), kLargeCases.begin(), kLargeCases.end());
  return cases;
}

void check_float_op(const Op& op, const Ref& ref, bool with_empty, double lo = -2, double hi = 2,
                    bool with_large = true) {
  for (DType t : kFloats)
    for (const Case& c : cases_for(t, with_empty, with_large))
      for (bool keepdim : {false, true})
        check(op, ref, random(c.sizes, t, lo, hi), c.dims, keepdim, t, rtol_for(t));
}

}  // namespace

// ---- floating reductions ----------------------------------------------------

TEST(Reduce, SumFloat) {
  check_float_op([](auto& x, auto& d, bool k) { return sum(x, d, k); }, ref_sum, true);
}
TEST(Reduce, MeanFloat) {
  check_float_op([](auto& x, auto& d, bool k) { return mean(x, d, k); }, ref_mean, true);
}
TEST(Reduce, ProdFloat) {
  check_float_op([](auto& x, auto& d, bool k) { return prod(x, d, k); }, ref_prod, true, 0.5, 1.5);
}
TEST(Reduce, AmaxAminFloat) {
  check_float_op([](auto& x, auto& d, bool k) { return amax(x, d, k); }, ref_max, false);
  check_float_op([](auto& x, auto& d, bool k) { return amin(x, d, k); }, ref_min, false);
}
TEST(Reduce, LogSumExpFloat) {
  check_float_op([](auto& x, auto& d, bool k) { return logsumexp(x, d, k); }, ref_logsumexp, true);
}
TEST(Reduce, VarStdFloat) {
  for (double c : {1.0, 0.0, 0.5, 2.0}) {
    SCOPED_TRACE(::testing::Message() << "correction " << c);
    auto rv = [c](const std::vector<double>& v) { return ref_var(v, c); };
    auto rs = [c](const std::vector<double>& v) { return std::sqrt(ref_var(v, c)); };
    check_float_op([c](auto& x, auto& d, bool k) { return var(x, d, c, k); }, rv, true, -2, 2,
                   c == 1);
    check_float_op([c](auto& x, auto& d, bool k) { return coil::std(x, d, c, k); }, rs, true, -2, 2,
                   c == 1);
  }
}

// A large offset and a small spread: a naive sum-of-squares formula loses every digit.
TEST(Reduce, VarIsNumericallyStable) {
  Tensor x = random({50000}, kFloat64, 1e8, 1e8 + 1);
  std::vector<double> v = values(x);
  expect_close(var(x), {ref_var(v, 1)}, {}, 1e-9);
  Tensor f = random({100000}, kFloat32, 1e4, 1e4 + 1);
  expect_close(var(f), {ref_var(values(f), 1)}, {}, 1e-4);
}

TEST(Reduce, SumAccumulatesAccurately) {
  Tensor x = random({1 << 20}, kFloat32, 0, 1);
  expect_close(sum(x), {ref_sum(values(x))}, {}, 1e-6);
  Tensor h = full({5000}, 1.0, kFloat16);  // float16 accumulation would stop at 2048
  EXPECT_EQ(sum(h).item<double>(), 5000);
  EXPECT_EQ(mean(h).item<double>(), 1);
}

// Reducing over a dim of stride 0 reads the same element repeatedly.
TEST(Reduce, ExpandedInput) {
  Tensor base = random({1, 5}, kFloat32);
  Tensor x = base.expand({4, 5});
  std::vector<double> b = values(base), e;
  for (double v : b) e.push_back(4 * v);
  expect_close(sum(x, {0}), e, {5});
}

// Neighbouring outputs that are not neighbours in memory (a step-2 slice), reduced over a far
// dim: the multi-lane paths with a lane stride.
TEST(Reduce, StridedLanes) {
  Tensor x = random({300, 200}).slice(1, 0, std::nullopt, 2);
  Tensor i = random({300, 200}, kInt32, -3, 3).slice(1, 0, std::nullopt, 2);
  check([](auto& x, auto& d, bool k) { return sum(x, d, k); }, ref_sum, x, {0}, false, kFloat32,
        1e-5);
  check([](auto& x, auto& d, bool k) { return amin(x, d, k); }, ref_min, x, {0}, true, kFloat32, 0,
        0);
  check([](auto& x, auto& d, bool k) { return var(x, d, 1, k); },
        [](auto& v) { return ref_var(v, 1); }, x, {0}, false, kFloat32, 1e-5);
  check([](auto& x, auto& d, bool k) { return any(x, d, k); }, ref_any, i, {0}, false, kBool, 0, 0);
  check([](auto& x, auto& d, bool k) { return argmax(x, d[0], k); },
        [](auto& v) { return ref_argmax(v, true); }, i, {0}, false, kInt64, 0, 0);
}

// ---- integer and bool inputs ------------------------------------------------

TEST(Reduce, IntegerSumProdGiveInt64) {
  for (DType t : {kInt32, kInt64, kUInt8, kInt8, kBool})
    for (const Case& c : cases_for(t, false))
      for (bool keepdim : {false, true}) {
        Tensor x = small_ints(c.sizes, t);
        check([](auto& x, auto& d, bool k) { return sum(x, d, k); }, ref_sum, x, c.dims, keepdim,
              kInt64, 0, 0);
        if (x.numel() <= 24)  // larger products overflow int64
          check([](auto& x, auto& d, bool k) { return prod(x, d, k); }, ref_prod, x, c.dims,
                keepdim, kInt64, 0, 0);
      }
}

TEST(Reduce, IntegerMinMaxAnyAll) {
  for (DType t : {kInt32, kInt64, kUInt8, kBool})
    for (const Case& c : cases_for(t, false))
      for (bool keepdim : {false, true}) {
        Tensor x = small_ints(c.sizes, t);
        check([](auto& x, auto& d, bool k) { return amax(x, d, k); }, ref_max, x, c.dims, keepdim,
              t, 0, 0);
        check([](auto& x, auto& d, bool k) { return amin(x, d, k); }, ref_min, x, c.dims, keepdim,
              t, 0, 0);
        DType logical = t == kUInt8 ? kUInt8 : kBool;  // uint8 stays uint8, as in PyTorch
        check([](auto& x, auto& d, bool k) { return any(x, d, k); }, ref_any, x, c.dims, keepdim,
              logical, 0, 0);
        check([](auto& x, auto& d, bool k) { return all(x, d, k); }, ref_all, x, c.dims, keepdim,
              logical, 0, 0);
      }
}

TEST(Reduce, AnyAllOnFloats) {
  for (const Case& c : cases_for(kFloat32, false))
    for (bool keepdim : {false, true}) {
      Tensor x = floor(random(c.sizes, kFloat32, -1, 1.5)).to(kFloat16);  // many zeros
      check([](auto& x, auto& d, bool k) { return any(x, d, k); }, ref_any, x, c.dims, keepdim,
            kBool, 0, 0);
      check([](auto& x, auto& d, bool k) { return all(x, d, k); }, ref_all, x, c.dims, keepdim,
            kBool, 0, 0);
    }
  Tensor nan = full({2}, kNaN);  // NaN is nonzero
  EXPECT_TRUE(all(nan).item<bool>());
}

TEST(Reduce, LogSumExpOfIntegersIsFloat32) {
  Tensor x = random({3, 4}, kInt64, -3, 3);
  check([](auto& x, auto& d, bool k) { return logsumexp(x, d, k); }, ref_logsumexp, x, {1}, false,
        kFloat32, 1e-5);
}

TEST(Reduce, SumWithDtypeCastsFirst) {
  Tensor i = random({4, 5}, kInt32, -3, 3);
  check([](auto& x, auto& d, bool k) { return sum(x, d, k, kFloat32); }, ref_sum, i, {1}, false,
        kFloat32, 0, 0);
  check([](auto& x, auto& d, bool k) { return sum(x, d, k, kInt32); }, ref_sum, i, {0}, true,
        kInt32, 0, 0);
  Tensor f = random({6, 5}, kFloat32, -3, 3);
  check([](auto& x, auto& d, bool k) { return sum(x, d, k, kFloat64); }, ref_sum, f, {}, false,
        kFloat64, 1e-12);
  // Cast first: each element truncates toward zero before the sum.
  Tensor g = full({3}, 1.75);
  EXPECT_EQ(sum(g, {}, false, kInt64).item<int64_t>(), 3);
}

// ---- argmax / argmin --------------------------------------------------------

TEST(Reduce, ArgmaxArgmin) {
  std::vector<DType> dtypes = {kFloat32, kFloat64, kFloat16, kBFloat16,
                               kInt32,   kInt64,   kUInt8,   kBool};
  for (DType t : dtypes)
    for (const Case& c : cases_for(t, false)) {
      if (c.dims.size() > 1) continue;
      // Few distinct values, so ties are common and the first index must win.
      Tensor x = small_ints(c.sizes, t);
      if (is_floating(t)) x = floor(x);
      for (bool keepdim : {false, true})
        for (bool is_max : {true, false}) {
          Op op = [is_max](const Tensor& x, const Shape& d, bool k) {
            std::optional<int64_t> dim;
            if (!d.empty()) dim = d[0];
            return is_max ? argmax(x, dim, k) : argmin(x, dim, k);
          };
          check(
              op, [is_max](auto& v) { return ref_argmax(v, is_max); }, x, c.dims, keepdim, kInt64,
              0, 0);
        }
    }
}

TEST(Reduce, ArgmaxShapes) {
  Tensor x = random({2, 3, 4});
  EXPECT_EQ(argmax(x).sizes(), Shape{});
  EXPECT_EQ(argmax(x, std::nullopt, true).sizes(), (Shape{1, 1, 1}));
  EXPECT_EQ(argmin(x, 1, true).sizes(), (Shape{2, 1, 4}));
  EXPECT_EQ(argmax(full({}, 3.0), 0).item<int64_t>(), 0);
  EXPECT_EQ(argmax(random({0, 3}), 1).sizes(), (Shape{0}));  // the reduced dim is not empty
}

// ---- NaN, infinities, empty and degenerate reductions -----------------------

TEST(Reduce, NaNPropagates) {
  for (DType t : kFloats) {
    SCOPED_TRACE(dtype_name(t));
    Tensor x = full({2, 5}, 1.0, t);
    x.select(0, 1).narrow(0, 2, 1).fill_(kNaN);
    x.select(0, 1).narrow(0, 4, 1).fill_(kNaN);
    x.select(0, 0).narrow(0, 3, 1).fill_(5.0);
    expect_close(amax(x, {1}), {5, kNaN}, {2});
    expect_close(amin(x, {1}), {1, kNaN}, {2});
    expect_close(amax(x, {0}), {1, 1, kNaN, 5, kNaN}, {5});
    expect_close(argmax(x, 1), {3, 2}, {2});
    expect_close(argmin(x, 1), {0, 2}, {2});
    expect_close(argmax(x), {7}, {});
    expect_close(sum(x, {1}), {9, kNaN}, {2});
    expect_close(var(x, {1}), {ref_var({1, 1, 1, 5, 1}, 1), kNaN}, {2}, rtol_for(t));
    expect_close(logsumexp(x, {1}), {ref_logsumexp({1, 1, 1, 5, 1}), kNaN}, {2}, rtol_for(t));
  }
  // NaN in a late block of a long row still wins.
  Tensor big = zeros({100000});
  big.narrow(0, 99999, 1).fill_(kNaN);
  EXPECT_TRUE(std::isnan(amax(big).item<double>()));
  EXPECT_EQ(argmin(big).item<int64_t>(), 99999);
}

// float16 loads use their own inline conversion: check zero signs, subnormals, extremes.
TEST(Reduce, Float16SpecialValues) {
  Tensor x = empty({6}, kFloat16);
  std::vector<double> v = {-0.0, 5.960464477539063e-08, 3.0e-5, -65504, 65504, 1.5};
  for (int64_t i = 0; i < 6; ++i) x.narrow(0, i, 1).fill_(v[static_cast<size_t>(i)]);
  std::vector<double> got = values(x);
  expect_close(sum(x, {0}, false, kFloat64), {ref_sum(got)}, {}, 1e-12, 0);
  expect_close(amax(x), {65504}, {});
  expect_close(amin(x), {-65504}, {});
  expect_close(amin(x.narrow(0, 0, 3)), {-0.0}, {});
  expect_close(cumsum(x.narrow(0, 0, 3), 0, kFloat64),
               {got[0], got[0] + got[1], got[0] + got[1] + got[2]}, {3}, 1e-12, 0);
  x.narrow(0, 2, 1).fill_(kInf);
  expect_close(amax(x), {kInf}, {});
  x.narrow(0, 3, 1).fill_(kNaN);
  EXPECT_TRUE(std::isnan(amin(x).item<double>()));
}

TEST(Reduce, LogSumExpInfinitiesAndLargeValues) {
  expect_close(logsumexp(full({3}, -kInf), {0}), {-kInf}, {});
  expect_close(logsumexp(full({3}, kInf), {0}), {kInf}, {});
  Tensor x = full({3}, 1.0);
  x.narrow(0, 1, 1).fill_(kInf);
  expect_close(logsumexp(x, {0}), {kInf}, {});
  expect_close(logsumexp(full({2}, 1000.0), {0}), {1000 + std::log(2.0)}, {});
  expect_close(logsumexp(full({2}, -1000.0), {0}), {-1000 + std::log(2.0)}, {});
  // A +inf in one block and large finite values in another.
  Tensor y = full({10000}, 500.0);
  y.narrow(0, 9000, 1).fill_(kInf);
  expect_close(logsumexp(y, {0}), {kInf}, {});
}

TEST(Reduce, EmptyReductions) {
  Tensor e = empty({2, 0});
  expect_close(sum(e, {1}), {0, 0}, {2});
  expect_close(prod(e, {1}), {1, 1}, {2});
  expect_close(mean(e, {1}), {kNaN, kNaN}, {2});
  expect_close(var(e, {1}), {kNaN, kNaN}, {2});
  expect_close(logsumexp(e, {1}), {-kInf, -kInf}, {2});
  expect_close(any(e, {1}), {0, 0}, {2});
  expect_close(all(e, {1}), {1, 1}, {2});
  expect_close(sum(e, {0}), {}, {0});
  expect_close(amax(e, {0}), {}, {0});
  EXPECT_EQ(sum(empty({0}, kInt32)).dtype(), kInt64);
}

TEST(Reduce, VarCorrectionEdges) {
  expect_close(var(full({1}, 3.0)), {kNaN}, {});  // N - correction == 0, m2 == 0
  Tensor two = arange(0, 2, 1, kFloat32);
  expect_close(var(two, {}, 2), {kInf}, {});  // divisor max(0, 0)
  expect_close(var(two, {}, 3), {kInf}, {});
  expect_close(var(two, {}, 0), {0.25}, {});
  expect_close(coil::std(two, {}, 0), {0.5}, {});
}

// ---- errors -----------------------------------------------------------------

TEST(Reduce, Errors) {
  Tensor x = random({2, 3});
  EXPECT_COIL_ERROR(sum(x, {2}), "sum: dim 2 is out of range");
  EXPECT_COIL_ERROR(amax(x, {-3}), "amax: dim -3 is out of range");
  EXPECT_COIL_ERROR(sum(x, {0, -2}), "appears more than once");
  EXPECT_COIL_ERROR(sum(full({}, 1.0), {1}), "out of range");
  Tensor i = arange(6).view({2, 3});
  EXPECT_COIL_ERROR(mean(i), "mean(): could not infer output dtype");
  EXPECT_COIL_ERROR(mean(i), "i64[2, 3]");
  EXPECT_COIL_ERROR(var(i), "std and var only support floating point");
  EXPECT_COIL_ERROR(coil::std(i > 2), "b8[2, 3]");
  Tensor e = empty({2, 0});
  EXPECT_COIL_ERROR(argmax(e), "Expected reduction dim to be specified for input.numel() == 0");
  EXPECT_COIL_ERROR(argmin(e, 1), "Expected reduction dim 1 to have non-zero size");
  EXPECT_COIL_ERROR(amax(e), "amax(): Expected reduction dim 1 to have non-zero size");
  EXPECT_COIL_ERROR(amin(e, {-1}), "f32[2, 0]");
  EXPECT_COIL_ERROR(argmax(x, 2), "argmax: dim 2 is out of range");
  EXPECT_COIL_ERROR(cumsum(x, -3), "cumsum: dim -3 is out of range");
}

// ---- cumsum -----------------------------------------------------------------

namespace {

// Row-major reference: the running sum along `dim`.
std::vector<double> ref_cumsum(const Tensor& x, int64_t dim) {
  std::vector<double> v = values(x), out(v.size());
  int64_t nd = x.dim();
  if (dim < 0) dim += std::max<int64_t>(nd, 1);
  int64_t stride = 1;
  for (int64_t d = dim + 1; d < nd; ++d) stride *= x.size(d);
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t pos = nd == 0 ? 0 : unravel(static_cast<int64_t>(i), x.sizes())[dim];
    out[i] = v[i] + (pos > 0 ? out[i - stride] : 0);
  }
  return out;
}

}  // namespace

TEST(Reduce, Cumsum) {
  std::vector<std::pair<Shape, int64_t>> cases = {
      {{}, 0},         {{}, -1},        {{1}, 0},         {{7}, 0},        {{7}, -1},
      {{3, 1, 5}, 1},  {{2, 3, 4}, 0},  {{2, 3, 4}, 1},   {{2, 3, 4}, -1}, {{2, 0, 3}, 1},
      {{300, 200}, 0}, {{300, 200}, 1}, {{5, 600, 3}, 1}, {{2, 2, 700}, 1}};
  std::vector<DType> dtypes = {kFloat32, kFloat64, kFloat16, kBFloat16,
                               kInt32,   kInt64,   kUInt8,   kBool};
  for (DType t : dtypes)
    for (auto& [sizes, dim] : cases) {
      SCOPED_TRACE(::testing::Message() << dtype_name(t) << shape_str(sizes) << " dim " << dim);
      Tensor x = small_ints(sizes, t);
      DType out_t = is_floating(t) ? t : kInt64;
      std::vector<double> e = ref_cumsum(x, dim);
      for (const Tensor& in : {x, noncontiguous(x)}) {
        Tensor y = cumsum(in, dim);
        EXPECT_EQ(y.dtype(), out_t);
        expect_close(y, e, sizes, rtol_for(t), 1e-6);
      }
    }
  Tensor i = random({3, 4}, kInt32, -3, 3);
  Tensor y = cumsum(i, 1, kFloat64);
  EXPECT_EQ(y.dtype(), kFloat64);
  expect_close(y, ref_cumsum(i, 1), {3, 4}, 0, 0);
}
