// The inductor backend end to end: the workloads of TARGETS.md compile to the expected number
// of kernels and match eager.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

class Inductor : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("COIL_DISABLE");
    compiler_reset();
  }
  int64_t count(const char* name) { return counters()[name]; }
};

void expect_matches(const Tensor& got, const Tensor& want, double rtol = 1e-5, double atol = 1e-5) {
  ASSERT_EQ(got.sizes(), want.sizes());
  ASSERT_EQ(got.dtype(), want.dtype());
  expect_close(got, values(want), want.sizes(), rtol, atol);
}

}  // namespace

TEST_F(Inductor, SinCosIsOneKernel) {
  auto f = [](const Tensor& x) { return sin(x).pow(2) + cos(x).pow(2); };
  auto cf = compile(f);
  Tensor x = random({1000});
  expect_matches(cf(x), f(x));
  EXPECT_EQ(count("generated_kernels"), 1);
}

TEST_F(Inductor, SoftmaxIsOneKernel) {
  auto f = [](const Tensor& x) { return softmax(x, -1); };
  auto cf = compile(f);
  Tensor x = random({37, 61});
  expect_matches(cf(x), f(x));
  EXPECT_EQ(count("generated_kernels"), 1);
}

TEST_F(Inductor, LayerNormGeluIsOneKernel) {
  auto f = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    return gelu(layer_norm(x, {64}, w, b));
  };
  auto cf = compile(f);
  Tensor x = random({33, 64}), w = random({64}), b = random({64});
  expect_matches(cf(x, w, b), f(x, w, b));
  EXPECT_EQ(count("generated_kernels"), 1);
}

TEST_F(Inductor, BatchNormReluIsOneKernel) {
  auto f = [](const Tensor& x, const Tensor& mean, const Tensor& var, const Tensor& w,
              const Tensor& b) { return relu(batch_norm(x, w, b, mean, var, false)); };
  auto cf = compile(f);
  Tensor x = random({2, 8, 5, 7}), mean = random({8}), var = random({8}, kFloat32, 0.5, 2),
         w = random({8}), b = random({8});
  expect_matches(cf(x, mean, var, w, b), f(x, mean, var, w, b));
  EXPECT_EQ(count("generated_kernels"), 1);
}

TEST_F(Inductor, InstanceNormIsAtMostTwoKernels) {
  auto f = [](const Tensor& x) {
    return (x - mean(x, {2, 3}, true)) / sqrt(var(x, {2, 3}, 1.0, true) + 1e-5);
  };
  auto cf = compile(f);
  Tensor x = random({2, 3, 9, 11});
  expect_matches(cf(x), f(x));
  EXPECT_LE(count("generated_kernels"), 2);
}

TEST_F(Inductor, MlpIsTwoLibraryCallsAndOneKernel) {
  auto f = [](const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2,
              const Tensor& b2) { return linear(gelu(linear(x, w1, b1)), w2, b2); };
  auto cf = compile(f);
  Tensor x = random({16, 32}), w1 = random({64, 32}), b1 = random({64}), w2 = random({32, 64}),
         b2 = random({32});
  expect_matches(cf(x, w1, b1, w2, b2), f(x, w1, b1, w2, b2), 1e-4, 1e-4);
  EXPECT_EQ(count("extern_calls"), 2);
  EXPECT_LE(count("generated_kernels"), 2);
}

TEST_F(Inductor, AttentionMatchesEager) {
  auto f = [](const Tensor& q, const Tensor& k, const Tensor& v) {
    return matmul(softmax(matmul(q, k.transpose(-2, -1)) * 0.125, -1), v);
  };
  auto cf = compile(f);
  Tensor q = random({2, 4, 16, 8}), k = random({2, 4, 16, 8}), v = random({2, 4, 16, 8});
  expect_matches(cf(q, k, v), f(q, k, v), 1e-4, 1e-5);
  // One attention call and no generated code: nothing for the C++ compiler to do.
  EXPECT_EQ(count("generated_kernels"), 0);
  EXPECT_EQ(count("extern_calls"), 1);
  // Scaled by division, rows longer than a vector, and a causal attention call (kept whole too).
  auto g = [](const Tensor& q, const Tensor& k, const Tensor& v) {
    return matmul(softmax(matmul(q, k.transpose(-1, -2)) / 8.0, -1), v) +
           scaled_dot_product_attention(q, k, v, {}, 0.0, true);
  };
  Tensor q2 = random({3, 150, 64}), k2 = random({3, 150, 64}), v2 = random({3, 150, 40});
  expect_matches(compile(g)(q2, k2, v2), g(q2, k2, v2), 1e-4, 1e-5);
  EXPECT_EQ(count("extern_calls"), 3);
}

// Every float dtype through a program with views, broadcasting and reductions; 16-bit types
// compute in float32 between load and store, as Inductor does, so they match to their precision.
TEST_F(Inductor, FloatDtypesMatchEager) {
  auto f = [](const Tensor& x, const Tensor& y) {
    Tensor z = (x.transpose(0, 1) * y).sigmoid();
    return softmax(z, 1) + sum(z, {0}, true);
  };
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtype_name(t));
    auto cf = compile(f);
    Tensor x = random({33, 17}, t), y = random({33}, t);
    Tol tol = tol_for(t);
    expect_matches(cf(x, y), f(x, y), tol.rtol * 4, tol.atol * 4);
  }
}

// Integer and bool programs are exact.
TEST_F(Inductor, IntegerProgramsAreExact) {
  auto f = [](const Tensor& a, const Tensor& b) {
    Tensor s = sum(a * b + 3, {1});
    return where(a > b, s.unsqueeze(1), a - b);
  };
  for (DType t : {kInt32, kInt64, kInt8}) {
    SCOPED_TRACE(dtype_name(t));
    auto cf = compile(f);
    Tensor a = random({6, 9}, kFloat32, -20, 20).to(t), b = random({6, 9}, kFloat32, -20, 20).to(t);
    Tensor got = cf(a, b), want = f(a, b);
    EXPECT_EQ(values(got), values(want));
  }
}

TEST_F(Inductor, LargeInputsUseEveryPath) {
  // Big enough for the parallel loops and vector bodies with scalar remainders.
  auto f = [](const Tensor& x) { return softmax(x, -1) * sigmoid(x) + mean(x, {0}); };
  auto cf = compile(f);
  Tensor x = random({301, 517});
  expect_matches(cf(x), f(x), 1e-5, 1e-5);
}

// Long rows' sums, products, maxima and minima keep several vector accumulators (four for cheap
// values, two for an exp's). Row i has its maximum at column i and its minimum at column
// 299 - i, so every accumulator's share of a row, the single vector steps after the split loop
// and the scalar remainder each hold some row's extremes; three rows hold a NaN, one in each.
TEST_F(Inductor, RowReductionsWithSeveralAccumulatorsMatchFloat64) {
  auto f = [](const Tensor& x) {
    return std::make_tuple(sum(x, {1}), amax(x, {1}), amin(x, {1}), prod(x * 0.01 + 1, {1}),
                           sum(exp(x), {1}));
  };
  const int64_t n = 300;  // 16 lanes: 4 steps of 4 vectors, 2 vectors, 12 scalars
  Tensor x = random({n, n});
  float* p = x.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    p[i * n + i] = 3;
    p[i * n + (n - 1 - i)] = -3;
  }
  p[0 * n + 53] = p[1 * n + 262] = p[2 * n + 295] = std::nanf("");
  auto [s, mx, mn, pr, se] = compile(f)(x);
  auto [s64, mx64, mn64, pr64, se64] = f(x.to(kFloat64));
  expect_matches(s, s64.to(kFloat32), 1e-5, 1e-4);
  expect_matches(mx, mx64.to(kFloat32), 0, 0);
  expect_matches(mn, mn64.to(kFloat32), 0, 0);
  expect_matches(pr, pr64.to(kFloat32), 1e-5, 0);
  expect_matches(se, se64.to(kFloat32), 1e-5, 0);
}

// A reduction over two inner dims (logsumexp over [8, 300] per batch entry): the split
// accumulators persist across the outer of the two inner loops, and the exp pass prefetches
// the next batch entry's values; against float64.
TEST_F(Inductor, LogSumExpOverTwoInnerDimsMatchesFloat64) {
  auto f = [](const Tensor& x) { return logsumexp(x, {1, 2}) + amax(x, {1, 2}); };
  Tensor x = random({6, 8, 300}) * 4;
  expect_matches(compile(f)(x), f(x.to(kFloat64)).to(kFloat32), 1e-5, 1e-5);
}

// sin and cos across float32's range within 3.5 ulp of float64 (SLEEF's u35 bound): coil's
// inline sincos up to 8192, the floats nearest multiples of pi/2 included (where the reduced
// argument is tiny), SLEEF's for vectors holding larger values; infinities give NaN, NaN
// stays NaN, and sin keeps the sign of zero.
TEST_F(Inductor, SinCosAcrossTheRangeMatchFloat64) {
  std::vector<float> xs = {0.0f, -0.0f, std::nanf(""), INFINITY, -INFINITY, 1e4f, -3e7f, 1e30f};
  manual_seed(11);
  std::vector<double> u = values(random({20000}, kFloat64, -1, 1));
  for (size_t i = 0; i < u.size(); ++i)  // uniform in value, and in exponent
    xs.push_back(static_cast<float>(i % 2 ? u[i] * 8192 : std::ldexp(u[i], 13 - int(i % 40))));
  for (int k = 1; k < 5216; k += 7) {
    float b = static_cast<float>(k * (M_PI / 2));
    xs.insert(xs.end(), {b, std::nextafter(b, 0.0f), std::nextafter(b, 1e9f), -b});
  }
  // The first vector holds the large values; the specials again inside one that does not.
  xs.insert(xs.begin() + 20, {-0.0f, 0.0f, std::nanf(""), 1.0f});
  auto [s, c] =
      compile([](const Tensor& x) { return std::make_tuple(sin(x), cos(x)); })(tensor(xs));
  std::vector<double> gs = values(s), gc = values(c);
  auto ulps = [](double got, double want) {
    return std::fabs(got - want) / std::ldexp(1.0, std::ilogb(static_cast<float>(want)) - 23);
  };
  for (size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i];
    if (!std::isfinite(x)) {
      EXPECT_TRUE(std::isnan(gs[i]) && std::isnan(gc[i])) << x;
      continue;
    }
    if (x == 0) {
      EXPECT_EQ(gs[i], 0.0);
      EXPECT_EQ(std::signbit(gs[i]), std::signbit(x));
      EXPECT_EQ(gc[i], 1.0);
      continue;
    }
    EXPECT_LE(ulps(gs[i], std::sin(x)), 3.5) << "sin(" << x << ") = " << gs[i];
    EXPECT_LE(ulps(gc[i], std::cos(x)), 3.5) << "cos(" << x << ") = " << gc[i];
  }
}

// tanh, coil's own (a series below |x| = 0.625, exp's quotient above), across float32's range
// within 4 ulp of float64: values uniform in exponent from 2^-30 to 2^6, the floats on either
// side of the two forms' boundary, and the specials: zeros keep their sign, large values and
// infinities give exactly +-1, NaN stays NaN.
TEST_F(Inductor, TanhAcrossTheRangeMatchesFloat64) {
  std::vector<float> xs = {0.0f,
                           -0.0f,
                           std::nanf(""),
                           INFINITY,
                           -INFINITY,
                           1e30f,
                           -1e30f,
                           20.0f,
                           -9.0f,
                           1e-30f,
                           -1e-40f,
                           0.625f,
                           -0.625f,
                           std::nextafter(0.625f, 0.0f),
                           std::nextafter(-0.625f, 0.0f)};
  manual_seed(12);
  const std::vector<double> u = values(random({40000}, kFloat64, 0.5, 1));
  for (size_t i = 0; i < u.size(); ++i)
    xs.push_back(static_cast<float>((i % 2 ? 1 : -1) * std::ldexp(u[i], int(i % 37) - 30)));
  const std::vector<double> got =
      values(compile([](const Tensor& x) { return tanh(x); })(tensor(xs)));
  for (size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i], want = std::tanh(x);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(got[i]));
    } else if (x == 0 || std::fabs(want) == 1) {
      EXPECT_EQ(got[i], want) << "tanh(" << x << ")";
      EXPECT_EQ(std::signbit(got[i]), std::signbit(x));
    } else {
      const double ulp = std::ldexp(1.0, std::max(std::ilogb(static_cast<float>(want)), -126) - 23);
      EXPECT_LE(std::fabs(got[i] - want) / ulp, 4.0) << "tanh(" << x << ") = " << got[i];
    }
  }
}

// The vector math (SLEEF, coil's own exp and erf) against float64 references on a dense grid:
// every function within a few float32 ulps (erf, a rational fit that trades ulps near 1 for
// speed, within 5e-7: 7 ulps there, still below float32 comparison tolerances such as 1.3e-6).
TEST_F(Inductor, VectorMathIsAccurate) {
  const int64_t n = 1000003;
  std::vector<float> grid(n);
  for (int64_t i = 0; i < n; ++i) grid[i] = static_cast<float>(-6.0 + 12.0 * i / (n - 1));
  Tensor x = tensor(grid);
  struct Case {
    const char* name;
    Tensor (*f)(const Tensor&);
    double (*ref)(double);
    double bound = 4e-7;  // relative; about 4 float32 ulps
  };
  const Case cases[] = {
      {"erf", [](const Tensor& t) { return erf(t); }, [](double v) { return std::erf(v); }, 5e-7},
      {"exp", [](const Tensor& t) { return exp(t); }, [](double v) { return std::exp(v); }},
      {"sin", [](const Tensor& t) { return sin(t); }, [](double v) { return std::sin(v); }},
      {"cos", [](const Tensor& t) { return cos(t); }, [](double v) { return std::cos(v); }},
      {"tanh", [](const Tensor& t) { return tanh(t); }, [](double v) { return std::tanh(v); }},
      {"sigmoid", [](const Tensor& t) { return sigmoid(t); },
       [](double v) { return 1 / (1 + std::exp(-v)); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto cf = compile(c.f);
    std::vector<double> got = values(cf(x));
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      double want = c.ref(grid[i]);
      worst = std::max(worst, std::fabs(got[i] - want) / (std::fabs(want) + 1e-30));
    }
    EXPECT_LT(worst, c.bound);
  }
}

// The wrapper's plan (the output_code log) for `f` compiled on (x, w), and f's result.
template <typename F>
std::string plan_of(F f, const Tensor& x, const Tensor& w) {
  decltype(f(x, w)) got;
  const std::string text = log_of("output_code", [&] { got = compile(f)(x, w); });
  if constexpr (std::is_same_v<decltype(got), Tensor>) {
    expect_matches(got, f(x, w), 1e-5, 1e-4);
  } else {
    auto want = f(x, w);
    for (size_t i = 0; i < want.size(); ++i) expect_matches(got[i], want[i], 1e-5, 1e-4);
  }
  return text;
}

// Memory planning: a kernel that reads a dying buffer only at the elements it writes writes
// its result in place; otherwise a buffer whose last reader has run gives its memory to the
// next buffer of the same dtype and size. Results stay right either way.
TEST_F(Inductor, MemoryPlanReusesDeadBuffers) {
  Tensor x = random({16, 16}), w = random({16, 16});
  std::string text =
      plan_of([](const Tensor& x, const Tensor& w) { return mm(sin(mm(exp(x), w)), w); }, x, w);
  EXPECT_NE(text.find("buf2 = in_place(buf1)"), std::string::npos) << text;
  EXPECT_NE(text.find("const float* buf1"), std::string::npos) << text;  // no __restrict
  // Read transposed, buf1 cannot be overwritten as it is read: buf2 takes buf0's memory. (An
  // addmm: a plain product read transposed is computed transposed instead.)
  text = plan_of(
      [](const Tensor& x, const Tensor& w) { return mm(sin(addmm(w, exp(x), w).t()), w); }, x, w);
  EXPECT_EQ(text.find("in_place"), std::string::npos) << text;
  EXPECT_NE(text.find("buf2 = reuse(buf0)"), std::string::npos) << text;
}

// A row kernel writes over a dying buffer it reads along each row (the softmax of a product, a
// normalisation after its variance), but not in the pass of a two-pass variance that reads it:
// the variance's second pass over the row follows that pass's stores.
TEST_F(Inductor, RowKernelsWriteInPlaceOnlyWhereSafe) {
  Tensor x = random({16, 16}), w = random({16, 16});
  std::string text =
      plan_of([](const Tensor& x, const Tensor& w) { return softmax(mm(x, w), 1) + 0.5; }, x, w);
  EXPECT_NE(text.find("= in_place(buf0)"), std::string::npos) << text;
  text = plan_of(
      [](const Tensor& x, const Tensor& w) {
        Tensor y = mm(x, w);
        return (y - mean(y, {1}, true)) / sqrt(var(y, {1}, 1, true) + 1e-5);
      },
      x, w);
  EXPECT_NE(text.find("= in_place(buf0)"), std::string::npos) << text;
  text = plan_of(
      [](const Tensor& x, const Tensor& w) {
        Tensor y = mm(x, w);
        return std::vector<Tensor>{var(y, {1}, 1, true), y * 2};
      },
      x, w);
  EXPECT_EQ(text.find("in_place(buf0)"), std::string::npos) << text;
}

// The kernels compile on a thread of their own while the extern calls before the first kernel
// run (the product here). The compiler's failure still reaches the caller as a coil::Error,
// from the first call and from every call after it; nothing is left running or half made.
TEST_F(Inductor, BackgroundCompileFailureReachesEveryCall) {
  setenv("COIL_CXXFLAGS", "-fno-such-flag-for-coil", 1);
  auto f = compile([](const Tensor& a, const Tensor& b) { return softmax(mm(a, b), 1) * 3; });
  Tensor a = random({8, 8}), b = random({8, 8});
  EXPECT_COIL_ERROR(f(a, b), "no-such-flag-for-coil");
  EXPECT_COIL_ERROR(f(a, b), "no-such-flag-for-coil");
  unsetenv("COIL_CXXFLAGS");
  compiler_reset();
  auto g = compile([](const Tensor& a, const Tensor& b) { return softmax(mm(a, b), 1) * 3; });
  expect_matches(g(a, b), softmax(mm(a, b), 1) * 3);
}

// A reduction over all of a [512, 256] tensor runs in chunks of two rows, so its loads index
// rows by r0 // 256 and columns by r0 % 256: the same element for every lane of a vector step
// (a scalar read) and consecutive elements (a vector load), not a gather lane by lane. Rows
// of 250 floats are not whole vectors, so there the lanes gather; both match eager.
TEST_F(Inductor, LoadsThroughFloorDivAndModStayVectors) {
  auto f = [](const Tensor& x, const Tensor& w) { return sum((x - mean(x, {1}, true)) * w); };
  Tensor x = random({512, 256}), w = random({256});
  std::string text = plan_of(f, x, w);
  EXPECT_NE(text.find("vload(in1 + r0 % 256)"), std::string::npos) << text;
  EXPECT_NE(text.find("= buf0[2*x0 + r0 / 256];"), std::string::npos) << text;
  EXPECT_EQ(text.find("k_ < COIL_VEC"), std::string::npos) << text;
  Tensor x2 = random({512, 250}), w2 = random({250});
  text = plan_of(f, x2, w2);
  EXPECT_NE(text.find("k_ < COIL_VEC"), std::string::npos) << text;
}

// Reductions over an outer dim of memory fold a chunk of outputs at a time along memory.
TEST_F(Inductor, ColumnReductionsMatchEager) {
  auto f = [](const Tensor& x) { return sum(x, {0}) * 0.5 + amax(x, {0}) - amin(x, {0}); };
  for (Shape s : {Shape{301, 517}, Shape{33, 7}, Shape{5, 3, 40}}) {
    for (DType t : {kFloat32, kFloat64}) {
      SCOPED_TRACE(dtype_name(t));
      auto cf = compile(f);
      Tensor x = random(s, t);
      expect_matches(cf(x), f(x), 1e-5, 1e-4);
    }
  }
}

// Welford's variance folds across a chunk of outputs too; values far from zero test that
// the running means (not sums of squares) carry the precision.
// Rows in two passes (short rows), by Welford (long rows), and the scalar remainder, all against
// float64 on data far from 0, where a one-pass sum of squares would lose every digit.
TEST_F(Inductor, RowVarianceMatchesFloat64) {
  auto f = [](const Tensor& x) { return var(x, {1}) + mean(x, {1}); };
  for (Shape s : {Shape{37, 300}, Shape{8, 20000}, Shape{5, 7}}) {
    Tensor x = random(s) + 1000;
    expect_matches(compile(f)(x), f(x.to(kFloat64)).to(kFloat32), 1e-4, 1e-4);
  }
}

TEST_F(Inductor, ColumnVarianceMatchesFloat64) {
  auto f = [](const Tensor& x) { return var(x, {0}) + var(x, {0}, 0.0); };
  for (Shape s : {Shape{301, 517}, Shape{33, 7}, Shape{5, 3, 40}}) {
    for (DType t : {kFloat32, kFloat64}) {
      SCOPED_TRACE(dtype_name(t));
      Tensor x = random(s, t) + 1000;
      expect_matches(compile(f)(x), f(x.to(kFloat64)).to(t), 1e-4, 1e-4);
    }
  }
}
