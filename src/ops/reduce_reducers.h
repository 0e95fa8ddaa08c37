// The reducers of the reduction ops (see reduce_engine.h for the interface). Floating sums
// accumulate in double over eight interleaved partial sums, blocks of which the engine merges
// in order: accurate for every dtype and friendly to the vectoriser.
#pragma once

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ops/reduce_engine.h"
#include "runtime/convert.h"
#include "runtime/dispatch_dtype.h"

namespace coil::ops::reduce {

template <typename T>
inline constexpr bool kIsFloat = std::is_floating_point_v<acc_type<T>>;

// The element as the type arithmetic on it happens in (float for 16-bit floats).
template <typename T>
inline acc_type<T> load(T v) {
  return static_cast<acc_type<T>>(v);
}
// Half's own conversion is out of line; this inline copy lets float16 loops run at speed.
template <>
inline float load(Half v) {
  uint32_t sign = static_cast<uint32_t>(v.bits & 0x8000u) << 16;
  uint32_t exp = (v.bits >> 10) & 0x1fu, mant = v.bits & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24
    float f = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -f : f;
  }
  uint32_t bits = exp == 31 ? sign | 0x7f800000u | (mant << 13)  // inf, nan
                            : sign | ((exp + 112) << 23) | (mant << 13);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// op-fold of f(p[i]) over n elements with eight independent accumulators. Pass f and op as
// lambdas, not function pointers, so that they inline and the loop vectorises.
template <typename Acc, typename T, typename F, typename Op>
inline Acc fold8(const T* p, int64_t n, Acc init, F f, Op op) {
  Acc s[8];
  for (auto& v : s) v = init;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int u = 0; u < 8; ++u) s[u] = op(s[u], f(p[i + u]));
  for (; i < n; ++i) s[0] = op(s[0], f(p[i]));
  for (int w = 4; w > 0; w /= 2)
    for (int u = 0; u < w; ++u) s[u] = op(s[u], s[u + w]);
  return s[0];
}

// acc[k] = op-fold of f(p[i * stride + k * ls]) over i < n: several outputs side by side, with
// a fixed-width fast path for a full tile of neighbouring lanes.
template <typename Acc, typename T, typename F, typename Op>
inline void fold_columns(const T* p, int64_t n, int64_t stride, int64_t lanes, int64_t ls, Acc* acc,
                         F f, Op op) {
  if (lanes == kMaxLanes && ls == 1) {
    Acc a[kMaxLanes];
    std::copy_n(acc, kMaxLanes, a);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < kMaxLanes; ++k) a[k] = op(a[k], f(p[i * stride + k]));
    std::copy_n(a, kMaxLanes, acc);
    return;
  }
  lanes = std::min(lanes, kMaxLanes);  // already so; tells the compiler acc's bound
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < lanes; ++k) acc[k] = op(acc[k], f(p[i * stride + k * ls]));
}

// sum and prod. Integers (and bool) accumulate in uint64 so that overflow wraps like int64
// does in PyTorch, without undefined behaviour.
template <typename T, typename OutT, bool kProd>
struct SumProd {
  using Acc = std::conditional_t<kIsFloat<T>, double, uint64_t>;
  using Out = OutT;
  static constexpr bool kOrdered = false;
  static Acc widen(T v) {
    if constexpr (kIsFloat<T>)
      return static_cast<double>(load(v));
    else
      return static_cast<uint64_t>(static_cast<int64_t>(v));
  }
  static Acc op(Acc a, Acc b) { return kProd ? a * b : a + b; }
  Acc init() const { return kProd ? 1 : 0; }
  Acc block(const T* p, int64_t n, int64_t) const {
    return fold8(
        p, n, init(), [](T v) { return widen(v); }, [](Acc a, Acc b) { return op(a, b); });
  }
  void columns(const T* p, int64_t n, int64_t stride, int64_t lanes, int64_t ls, Acc* acc) const {
    fold_columns(
        p, n, stride, lanes, ls, acc, [](T v) { return widen(v); },
        [](Acc a, Acc b) { return op(a, b); });
  }
  void merge(Acc& a, const Acc& b) const { a = op(a, b); }
  Out finish(const Acc& a, int64_t) const {
    if constexpr (kIsFloat<T>)
      return convert<Out>(a);
    else
      return convert<Out>(static_cast<int64_t>(a));
  }
};

template <typename T>
struct Mean : SumProd<T, T, false> {
  T finish(const double& a, int64_t n) const {
    return convert<T>(a / static_cast<double>(n));  // n == 0 gives nan, as in PyTorch
  }
};

// amax/amin: NaN wins (sticky), as in PyTorch. For bool, max is "any" and min is "all".
template <typename T, bool kMax>
struct MinMax {
  using Acc = acc_type<T>;
  using Out = T;
  static constexpr bool kOrdered = false;
  static Acc op(Acc a, Acc b) {  // a NaN `a` stays: nothing compares past it
    bool take = kMax ? b > a : b < a;
    if constexpr (kIsFloat<T>) take = take || b != b;
    return take ? b : a;
  }
  Acc init() const {
    using L = std::numeric_limits<Acc>;
    if constexpr (kIsFloat<T>)
      return kMax ? -L::infinity() : L::infinity();
    else
      return kMax ? L::lowest() : L::max();
  }
  Acc block(const T* p, int64_t n, int64_t) const {
    return fold8(
        p, n, init(), [](T v) { return load(v); }, [](Acc a, Acc b) { return op(a, b); });
  }
  void columns(const T* p, int64_t n, int64_t stride, int64_t lanes, int64_t ls, Acc* acc) const {
    fold_columns(
        p, n, stride, lanes, ls, acc, [](T v) { return load(v); },
        [](Acc a, Acc b) { return op(a, b); });
  }
  void merge(Acc& a, const Acc& b) const { a = op(a, b); }
  Out finish(const Acc& a, int64_t) const { return convert<T>(a); }
};

// any/all: a nonzero element (NaN included) is true.
template <typename T, typename OutT, bool kAll>
struct AnyAll {
  using Acc = bool;
  using Out = OutT;
  static constexpr bool kOrdered = false;
  static bool truth(T v) { return load(v) != acc_type<T>(0); }
  static bool op(bool a, bool b) { return kAll ? a && b : a || b; }
  Acc init() const { return kAll; }
  Acc block(const T* p, int64_t n, int64_t) const {
    return fold8(
        p, n, init(), [](T v) { return truth(v); }, [](bool a, bool b) { return op(a, b); });
  }
  void columns(const T* p, int64_t n, int64_t stride, int64_t lanes, int64_t ls, Acc* acc) const {
    fold_columns(
        p, n, stride, lanes, ls, acc, [](T v) { return truth(v); },
        [](bool a, bool b) { return op(a, b); });
  }
  void merge(Acc& a, const Acc& b) const { a = op(a, b); }
  Out finish(const Acc& a, int64_t) const { return static_cast<Out>(a); }
};

// argmax/argmin: the first index of the extreme value; a NaN counts as the extreme (the first
// NaN wins), as in PyTorch.
template <typename T, bool kMax>
struct ArgMinMax {
  struct Acc {
    acc_type<T> v{};
    int64_t i = -1;  // -1: no element yet
  };
  using Out = int64_t;
  static constexpr bool kOrdered = true;
  static bool is_nan(acc_type<T> v) {
    if constexpr (kIsFloat<T>)
      return v != v;
    else
      return false;
  }
  // Whether `b`, found later than `a`, replaces it.
  static bool better(acc_type<T> b, acc_type<T> a) {
    if (is_nan(a)) return false;
    return is_nan(b) || (kMax ? b > a : b < a);
  }
  Acc init() const { return {}; }
  Acc block(const T* p, int64_t n, int64_t r0) const {
    Acc a{load(p[0]), r0};
    for (int64_t i = 1; i < n && !is_nan(a.v); ++i) {
      acc_type<T> v = load(p[i]);
      if (better(v, a.v)) a = {v, r0 + i};
    }
    return a;
  }
  void merge(Acc& a, const Acc& b) const {
    if (b.i >= 0 && (a.i < 0 || better(b.v, a.v))) a = b;
  }
  Out finish(const Acc& a, int64_t) const { return a.i; }
};

// var/std: each block by two passes (its mean, then squared deviations from it), blocks
// combined with Chan et al.'s pairwise update: stable without a division per element.
template <typename T, bool kStd>
struct VarStd {
  struct Acc {
    double n = 0, mean = 0, m2 = 0;
  };
  using Out = T;
  static constexpr bool kOrdered = false;
  double correction = 1;

  static double widen(T v) { return static_cast<double>(load(v)); }
  Acc init() const { return {}; }
  Acc block(const T* p, int64_t n, int64_t) const {
    auto add = [](double a, double b) { return a + b; };
    auto value = [](T v) { return widen(v); };
    double mean = fold8(p, n, 0.0, value, add) / static_cast<double>(n);
    auto dev2 = [mean](T v) {
      double d = widen(v) - mean;
      return d * d;
    };
    return {static_cast<double>(n), mean, fold8(p, n, 0.0, dev2, add)};
  }
  void merge(Acc& a, const Acc& b) const {
    if (b.n == 0) return;
    if (a.n == 0) {
      a = b;
      return;
    }
    double n = a.n + b.n, delta = b.mean - a.mean;
    a.m2 += b.m2 + delta * delta * a.n * b.n / n;
    a.mean += delta * b.n / n;
    a.n = n;
  }
  // PyTorch divides by max(0, N - correction): nan or inf when the correction uses up N.
  Out finish(const Acc& a, int64_t) const {
    double var = a.m2 / std::max(0.0, a.n - correction);
    return convert<T>(kStd ? std::sqrt(var) : var);
  }
};

// logsumexp = shift + log(sum exp(x - shift)), shift the block maximum (0 when that is
// infinite, as PyTorch does, so all -inf gives -inf and any +inf gives +inf). exp runs in the
// compute type C (float unless the input is double; integers compute in float32 like PyTorch),
// the sums in double.
template <typename T, typename OutT>
struct LogSumExp {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  struct Acc {
    double shift = 0, s = 0;
  };
  using Out = OutT;
  static constexpr bool kOrdered = false;
  static C widen(T v) { return static_cast<C>(load(v)); }

  Acc init() const { return {}; }
  Acc block(const T* p, int64_t n, int64_t) const {
    C m = -std::numeric_limits<C>::infinity();
    for (int64_t i = 0; i < n; ++i) m = std::max(m, widen(p[i]));  // NaN reaches s below
    C shift = std::isfinite(m) ? m : C(0);
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += static_cast<double>(std::exp(widen(p[i]) - shift));
    return {static_cast<double>(shift), s};
  }
  void merge(Acc& a, const Acc& b) const {
    if (b.s == 0) return;  // empty, or only -inf
    if (a.s == 0 || std::isnan(b.s)) {
      a = b;
    } else if (std::isinf(b.s) || std::isnan(a.s) || std::isinf(a.s)) {
      a.s = std::isnan(a.s) ? a.s : a.s + b.s;  // inf (no inf*0 from rescaling) or nan
    } else {
      double m = std::max(a.shift, b.shift);
      a.s = a.s * std::exp(a.shift - m) + b.s * std::exp(b.shift - m);
      a.shift = m;
    }
  }
  Out finish(const Acc& a, int64_t) const { return convert<Out>(std::log(a.s) + a.shift); }
};

}  // namespace coil::ops::reduce
