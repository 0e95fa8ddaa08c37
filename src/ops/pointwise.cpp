// Pointwise ops: unary math, binary arithmetic and comparisons with broadcasting and
// PyTorch's type promotion, where, clamp, casts and copies.
#include <cmath>

#include "ops/meta_util.h"
#include "runtime/convert.h"
#include "runtime/cuda_runtime.h"

namespace coil::ops {

namespace {

// How a unary op chooses its result dtype.
enum class UnaryOut { Same, Float, Bool };

TensorMeta unary_meta(const Args& a, const char* op, UnaryOut rule) {
  const Tensor& x = a.tensor(0);
  DType t = rule == UnaryOut::Float  ? float_result(x.dtype())
            : rule == UnaryOut::Bool ? kBool
                                     : x.dtype();
  return elementwise_meta(a, {0}, t, x.sizes(), x.device());
}

// Calls f.template operator()<T>() for `t`: any dtype, or with kFloating only the floating
// ones (ops that compute in floating point whatever their inputs).
template <bool kFloating, typename F>
void dispatch_compute(DType t, F&& f) {
  if constexpr (kFloating)
    dispatch_floating(t, f);
  else
    dispatch_dtype(t, f);
}

// out = f(x) with x first converted to `compute`: the output dtype, or for a predicate
// (kPredicate: bool results whatever the input) the input's; kFloating where `compute` is
// always floating. Template flags rather than tests of the dtypes, so that each op instantiates
// its loops once per dtype it can meet: most of this file's compile time is those
// instantiations.
template <bool kPredicate, bool kFloating = false, typename F>
Tensor unary_apply(const Tensor& x_in, const TensorMeta& out_meta, DType compute, F f) {
  COIL_ASSERT(kPredicate ? out_meta.dtype == kBool : out_meta.dtype == compute);
  COIL_ASSERT(!kFloating || is_floating(compute));
  Tensor x = as_dtype(x_in, compute);
  Tensor out = empty_from_meta(out_meta);
  dispatch_compute<kFloating>(compute, [&]<typename T>() {
    using C = acc_type<T>;
    using Out = std::conditional_t<kPredicate, bool, T>;
    map_unary<T, Out>(x, out, [&](T v) { return convert<Out>(f(static_cast<C>(v))); });
  });
  return out;
}

// Floating-point math applied in the value's own precision; integer inputs never reach it
// (their ops promote to float first), but it must compile for them.
template <typename C, typename F>
C fmath(C v, F f) {
  if constexpr (std::is_floating_point_v<C>)
    return f(v);
  else
    return C(0);
}

void reject_bool(const Tensor& x, const char* op, const char* hint) {
  COIL_CHECK(x.dtype() != kBool, op, ": not supported on bool tensors (got ", describe(x), "); ",
             hint);
}

}  // namespace

// ---- unary ------------------------------------------------------------------------------------

// Ops whose result is floating: integer inputs compute in float32.
#define COIL_FLOAT_UNARY(name, expr)                                                               \
  std::vector<TensorMeta> meta_##name(const Args& a) {                                             \
    return one(unary_meta(a, #name, UnaryOut::Float));                                             \
  }                                                                                                \
  std::vector<Tensor> eager_##name(const Args& a, const std::vector<TensorMeta>& out) {            \
    return one(                                                                                    \
        unary_apply<false, true>(a.tensor(0), out[0], out[0].dtype, [](auto x) { return expr; })); \
  }

COIL_FLOAT_UNARY(exp, std::exp(x))
COIL_FLOAT_UNARY(exp2, std::exp2(x))
COIL_FLOAT_UNARY(expm1, std::expm1(x))
COIL_FLOAT_UNARY(log, std::log(x))
COIL_FLOAT_UNARY(log2, std::log2(x))
COIL_FLOAT_UNARY(log1p, std::log1p(x))
COIL_FLOAT_UNARY(sqrt, std::sqrt(x))
COIL_FLOAT_UNARY(rsqrt, decltype(x)(1) / std::sqrt(x))
COIL_FLOAT_UNARY(reciprocal, decltype(x)(1) / x)
COIL_FLOAT_UNARY(sin, std::sin(x))
COIL_FLOAT_UNARY(cos, std::cos(x))
COIL_FLOAT_UNARY(tan, std::tan(x))
COIL_FLOAT_UNARY(tanh, std::tanh(x))
COIL_FLOAT_UNARY(sigmoid, decltype(x)(1) / (decltype(x)(1) + std::exp(-x)))
COIL_FLOAT_UNARY(silu, x / (decltype(x)(1) + std::exp(-x)))
COIL_FLOAT_UNARY(erf, std::erf(x))
#undef COIL_FLOAT_UNARY

std::vector<TensorMeta> meta_gelu(const Args& a) {
  const std::string& mode = a.str(1);
  COIL_CHECK(mode == "none" || mode == "tanh",
             "gelu: approximate must be \"none\" or \"tanh\", got \"", mode, "\"");
  return one(unary_meta(a, "gelu", UnaryOut::Float));
}
std::vector<Tensor> eager_gelu(const Args& a, const std::vector<TensorMeta>& out) {
  bool tanh_mode = a.str(1) == "tanh";
  return one(unary_apply<false, true>(a.tensor(0), out[0], out[0].dtype, [tanh_mode](auto x) {
    using C = decltype(x);
    if (tanh_mode) {
      const C k = static_cast<C>(0.7978845608028654);  // sqrt(2/pi)
      return C(0.5) * x * (C(1) + std::tanh(k * (x + C(0.044715) * x * x * x)));
    }
    return C(0.5) * x * (C(1) + std::erf(x * static_cast<C>(0.7071067811865476)));
  }));
}

// Ops that keep the input dtype (integers included).
#define COIL_SAME_UNARY(name, check, expr)                                              \
  std::vector<TensorMeta> meta_##name(const Args& a) {                                  \
    check;                                                                              \
    return one(unary_meta(a, #name, UnaryOut::Same));                                   \
  }                                                                                     \
  std::vector<Tensor> eager_##name(const Args& a, const std::vector<TensorMeta>& out) { \
    return one(unary_apply<false>(a.tensor(0), out[0], out[0].dtype, [](auto x) {       \
      using C = decltype(x);                                                            \
      (void)sizeof(C);                                                                  \
      return expr;                                                                      \
    }));                                                                                \
  }

COIL_SAME_UNARY(neg,
                reject_bool(a.tensor(0), "neg",
                            "to invert a mask use logical_not() or the ! operator instead"),
                C(-x))
COIL_SAME_UNARY(abs, (void)0, x < C(0) ? C(-x) : x)
COIL_SAME_UNARY(sign, (void)0, C((C(0) < x) - (x < C(0))))
// NaN passes through, as in PyTorch.
COIL_SAME_UNARY(relu, reject_bool(a.tensor(0), "relu", "convert it with .to(coil::kFloat32) first"),
                x < C(0) ? C(0) : x)
COIL_SAME_UNARY(floor, (void)0, fmath(x, [](auto y) {
                                  return std::floor(y);
                                }) + (std::is_floating_point_v<C> ? C(0) : x))
COIL_SAME_UNARY(ceil, (void)0, fmath(x, [](auto y) {
                                 return std::ceil(y);
                               }) + (std::is_floating_point_v<C> ? C(0) : x))
COIL_SAME_UNARY(round, (void)0, fmath(x, [](auto y) {
                                  return std::nearbyint(y);
                                }) + (std::is_floating_point_v<C> ? C(0) : x))
COIL_SAME_UNARY(trunc, (void)0, fmath(x, [](auto y) {
                                  return std::trunc(y);
                                }) + (std::is_floating_point_v<C> ? C(0) : x))
#undef COIL_SAME_UNARY

// Predicates: bool results, computed in the input's own dtype.
#define COIL_BOOL_UNARY(name, expr)                                                     \
  std::vector<TensorMeta> meta_##name(const Args& a) {                                  \
    return one(unary_meta(a, #name, UnaryOut::Bool));                                   \
  }                                                                                     \
  std::vector<Tensor> eager_##name(const Args& a, const std::vector<TensorMeta>& out) { \
    const Tensor& x = a.tensor(0);                                                      \
    return one(unary_apply<true>(x, out[0], x.dtype(), [](auto v) {                     \
      using C = decltype(v);                                                            \
      (void)sizeof(C);                                                                  \
      return expr;                                                                      \
    }));                                                                                \
  }
COIL_BOOL_UNARY(logical_not, v == C(0))
COIL_BOOL_UNARY(isnan, fmath(v, [](auto y) { return C(std::isnan(y)); }) != C(0))
COIL_BOOL_UNARY(isinf, fmath(v, [](auto y) { return C(std::isinf(y)); }) != C(0))
#undef COIL_BOOL_UNARY

// ---- casts and copies -----------------------------------------------------------------------

// A channels-last tensor's cast is channels-last (torch's memory_format=preserve: a channels-last
// model's weights cast by autocast stay as its convolutions read them).
std::vector<TensorMeta> meta_to_dtype(const Args& a) {
  const Tensor& x = a.tensor(0);
  return one(elementwise_meta(a, {0}, a.dtype(1), x.sizes(), x.device()));
}
namespace {
// x copied into a new tensor of `m` (its dtype and layout, on x's device).
Tensor copy_as(const Tensor& x, const TensorMeta& m) {
  if (m.strides == contiguous_strides(m.sizes))
    return x.dtype() == m.dtype ? contiguous_copy(x) : to_dtype_copy(x, m.dtype);
  Tensor r = empty_from_meta(m);
  copy_into(r, x);
  return r;
}
}  // namespace

std::vector<Tensor> eager_to_dtype(const Args& a, const std::vector<TensorMeta>& out) {
  return one(copy_as(a.tensor(0), out[0]));
}

// A channels-last tensor's clone is channels-last (torch's memory_format=preserve); any other
// layout's is contiguous.
std::vector<TensorMeta> meta_clone(const Args& a) {
  const Tensor& x = a.tensor(0);
  return one(elementwise_meta(a, {0}, x.dtype(), x.sizes(), x.device()));
}
std::vector<Tensor> eager_clone(const Args& a, const std::vector<TensorMeta>& out) {
  return one(copy_as(a.tensor(0), out[0]));
}

// contiguous returns its input itself when it is already contiguous, as in PyTorch.
std::vector<TensorMeta> meta_contiguous(const Args& a) {
  const Tensor& x = a.tensor(0);
  return one(x.is_contiguous() ? meta_of(x) : contiguous_meta(x.dtype(), x.sizes(), x.device()));
}
std::vector<Tensor> eager_contiguous(const Args& a, const std::vector<TensorMeta>&) {
  const Tensor& x = a.tensor(0);
  return one(x.is_contiguous() ? x : contiguous_copy(x));
}

// A copy to another device (host <-> GPU, or between GPUs): contiguous on the target, or
// channels-last where the source is (torch's memory_format=preserve).
std::vector<TensorMeta> meta_to_device(const Args& a) {
  const Tensor& x = a.tensor(0);
  const Device d = a.device(1);
  if (d.is_cuda()) cuda::check_device(d, "to");
  return one(layout_like(contiguous_meta(x.dtype(), x.sizes(), d), x));
}
std::vector<Tensor> eager_to_device(const Args& a, const std::vector<TensorMeta>& out) {
  // The source made dense in the result's order on its own device first (a kernel there), then
  // one copy of its bytes.
  Tensor x = a.tensor(0);
  if (x.device() == out[0].device) return one(copy_as(x, out[0]));
  const bool nhwc = out[0].strides != contiguous_strides(out[0].sizes);
  if (!x.is_contiguous(nhwc ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous))
    x = copy_as(x, {x.dtype(), x.sizes(), out[0].strides, 0, x.device()});
  const size_t nbytes = static_cast<size_t>(x.numel()) * itemsize(x.dtype());
  // Non-blocking, as torch's: from pinned memory to a GPU, or from a GPU into new pinned memory,
  // the copy is queued and the host goes on (it must not read or reuse the host memory before a
  // synchronising call); otherwise the host waits.
  const bool non_blocking = a.b(2);
  if (non_blocking && !nhwc && x.device().is_cuda() && out[0].device.is_cpu()) {
    Tensor y = empty_pinned(out[0].sizes, out[0].dtype);
    cuda::copy_to_pinned(y.impl()->data(), x.impl()->data(), x.device().index, nbytes);
    return one(y);
  }
  Tensor y = empty_from_meta(out[0]);
  if (non_blocking && x.is_pinned() && y.device().is_cuda())
    cuda::copy_from_pinned(y.impl()->data(), y.device().index, x.impl()->data(), nbytes);
  else
    cuda::copy(y.impl()->data(), y.device(), x.impl()->data(), x.device(), nbytes);
  return one(y);
}

// ---- binary -----------------------------------------------------------------------------------

namespace {

enum class BinaryOut { Common, Bool, Float };

struct BinaryPlan {
  DType compute;
  TensorMeta out;
};

BinaryPlan binary_plan(const Args& a, const char* op, BinaryOut rule) {
  COIL_CHECK(a.is_tensor(0) || a.is_tensor(1), op, ": at least one operand must be a tensor");
  Shape shape = broadcast_args(a, {0, 1}, op);
  Device dev = common_device(a, {0, 1}, op);
  DType common = result_type(a, {0, 1});
  DType compute = rule == BinaryOut::Float ? float_result(common) : common;
  DType out = rule == BinaryOut::Bool ? kBool : compute;
  return {compute, elementwise_meta(a, {0, 1}, out, shape, dev)};
}

// As unary_apply: kPredicate for the comparisons (bool results).
template <bool kPredicate, bool kFloating = false, typename F>
Tensor binary_apply(const Args& a, const TensorMeta& out_meta, DType compute, F f) {
  COIL_ASSERT(kPredicate ? out_meta.dtype == kBool : out_meta.dtype == compute);
  COIL_ASSERT(!kFloating || is_floating(compute));
  Tensor x = operand(a, 0, compute), y = operand(a, 1, compute);
  Tensor out = empty_from_meta(out_meta);
  dispatch_compute<kFloating>(compute, [&]<typename T>() {
    using C = acc_type<T>;
    using Out = std::conditional_t<kPredicate, bool, T>;
    map_binary<T, T, Out>(
        x, y, out, [&](T p, T q) { return convert<Out>(f(static_cast<C>(p), static_cast<C>(q))); });
  });
  return out;
}

// Integer division and remainder by zero have no value; PyTorch raises too.
void check_int_divisor(const Args& a, DType compute, const char* op) {
  if (is_floating(compute)) return;
  Tensor y = operand(a, 1, kInt64);
  for (double v : y.to_vector_double())
    COIL_CHECK(v != 0, op, ": integer division by zero (divisor ", describe_arg(a, 1),
               " contains 0); use a floating-point dtype to get inf/nan instead");
}

template <typename C>
C floor_div(C x, C y) {
  if constexpr (std::is_floating_point_v<C>) {
    // As PyTorch's div_floor: fmod-based so that huge quotients stay exact.
    if (y == C(0)) return x / y;
    C m = std::fmod(x, y);
    C d = (x - m) / y;
    if (m != C(0) && ((y < C(0)) != (m < C(0)))) d -= C(1);
    if (d == C(0)) return std::copysign(C(0), x / y);
    C f = std::floor(d);
    return d - f > C(0.5) ? f + C(1) : f;
  } else if constexpr (std::is_same_v<C, bool>) {
    return x;
  } else {
    C q = x / y;
    if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
    return q;
  }
}

template <typename C>
C py_remainder(C x, C y) {
  if constexpr (std::is_floating_point_v<C>) {
    C m = std::fmod(x, y);
    if (m != C(0) && ((m < C(0)) != (y < C(0)))) m += y;
    return m;
  } else if constexpr (std::is_same_v<C, bool>) {
    return false;
  } else {
    C m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return m;
  }
}

}  // namespace

#define COIL_BINARY(name, rule, check, expr)                                                   \
  std::vector<TensorMeta> meta_##name(const Args& a) {                                         \
    BinaryPlan p = binary_plan(a, #name, BinaryOut::rule);                                     \
    check;                                                                                     \
    return one(p.out);                                                                         \
  }                                                                                            \
  std::vector<Tensor> eager_##name(const Args& a, const std::vector<TensorMeta>& out) {        \
    BinaryPlan p = binary_plan(a, #name, BinaryOut::rule);                                     \
    return one(                                                                                \
        binary_apply<BinaryOut::rule == BinaryOut::Bool, BinaryOut::rule == BinaryOut::Float>( \
            a, out[0], p.compute, [](auto x, auto y) {                                         \
              using C = decltype(x);                                                           \
              (void)sizeof(C);                                                                 \
              return expr;                                                                     \
            }));                                                                               \
  }

COIL_BINARY(add, Common, (void)0, C(x + y))
COIL_BINARY(sub, Common,
            COIL_CHECK(p.compute != kBool, "sub: subtracting bool tensors is not supported (",
                       describe_arg(a, 0), " - ", describe_arg(a, 1),
                       "); use logical_xor or convert to an integer dtype"),
            C(x - y))
COIL_BINARY(mul, Common, (void)0, C(x* y))
COIL_BINARY(maximum, Common, (void)0, fmath(x, [&](auto v) {
                                        return std::isnan(v) || std::isnan(y) ? v + y
                                                                              : (v > y ? v : y);
                                      }) + (std::is_floating_point_v<C> ? C(0) : (x > y ? x : y)))
COIL_BINARY(minimum, Common, (void)0, fmath(x, [&](auto v) {
                                        return std::isnan(v) || std::isnan(y) ? v + y
                                                                              : (v < y ? v : y);
                                      }) + (std::is_floating_point_v<C> ? C(0) : (x < y ? x : y)))
COIL_BINARY(atan2, Float, (void)0, std::atan2(x, y))
COIL_BINARY(eq, Bool, (void)0, x == y)
COIL_BINARY(ne, Bool, (void)0, x != y)
COIL_BINARY(lt, Bool, (void)0, x < y)
COIL_BINARY(le, Bool, (void)0, x <= y)
COIL_BINARY(gt, Bool, (void)0, x > y)
COIL_BINARY(ge, Bool, (void)0, x >= y)
COIL_BINARY(logical_and, Bool, (void)0, (x != C(0)) && (y != C(0)))
COIL_BINARY(logical_or, Bool, (void)0, (x != C(0)) || (y != C(0)))
#undef COIL_BINARY

std::vector<TensorMeta> meta_div(const Args& a) {
  auto mode = a.opt_str(2);
  COIL_CHECK(!mode || *mode == "floor" || *mode == "trunc",
             "div: rounding_mode must be None, \"floor\" or \"trunc\", got \"", *mode, "\"");
  BinaryPlan p = binary_plan(a, "div", mode ? BinaryOut::Common : BinaryOut::Float);
  COIL_CHECK(p.compute != kBool || !mode,
             "div: rounding division of bool tensors is not supported");
  return one(p.out);
}
std::vector<Tensor> eager_div(const Args& a, const std::vector<TensorMeta>& out) {
  auto mode = a.opt_str(2);
  BinaryPlan p = binary_plan(a, "div", mode ? BinaryOut::Common : BinaryOut::Float);
  if (!mode)
    return one(
        binary_apply<false, true>(a, out[0], p.compute, [](auto x, auto y) { return x / y; }));
  check_int_divisor(a, p.compute, "div");
  if (*mode == "floor")
    return one(
        binary_apply<false>(a, out[0], p.compute, [](auto x, auto y) { return floor_div(x, y); }));
  return one(binary_apply<false>(a, out[0], p.compute, [](auto x, auto y) {
    using C = decltype(x);
    if constexpr (std::is_floating_point_v<C>)
      return std::trunc(x / y);
    else
      return C(x / y);
  }));
}

std::vector<TensorMeta> meta_remainder(const Args& a) {
  return one(binary_plan(a, "remainder", BinaryOut::Common).out);
}
std::vector<Tensor> eager_remainder(const Args& a, const std::vector<TensorMeta>& out) {
  BinaryPlan p = binary_plan(a, "remainder", BinaryOut::Common);
  check_int_divisor(a, p.compute, "remainder");
  return one(
      binary_apply<false>(a, out[0], p.compute, [](auto x, auto y) { return py_remainder(x, y); }));
}

std::vector<TensorMeta> meta_pow(const Args& a) {
  BinaryPlan p = binary_plan(a, "pow", BinaryOut::Common);
  // A data-less exponent (a capture proxy, a parsed graph's input) is checked when it runs.
  bool has_data = !a.is_tensor(1) || a.tensor(1).has_storage();
  if (!is_floating(p.compute) && p.compute != kBool && has_data) {
    Tensor e = operand(a, 1, kInt64);
    if (e.has_storage())
      for (double v : e.to_vector_double())
        COIL_CHECK(v >= 0, "pow: integers to negative integer powers are not allowed (",
                   describe_arg(a, 0), " ** ", describe_arg(a, 1),
                   "); convert the base to a floating-point dtype");
  }
  return one(p.out);
}
std::vector<Tensor> eager_pow(const Args& a, const std::vector<TensorMeta>& out) {
  BinaryPlan p = binary_plan(a, "pow", BinaryOut::Common);
  return one(binary_apply<false>(a, out[0], p.compute, [](auto x, auto y) {
    using C = decltype(x);
    if constexpr (std::is_floating_point_v<C>) {
      // As PyTorch: x ** 0.5 is sqrt(x), which differs from std::pow at -0 and -inf.
      return y == C(0.5) ? std::sqrt(x) : std::pow(x, y);
    } else if constexpr (std::is_same_v<C, bool>) {
      return C(x || !y);
    } else {
      C r = 1, b = x;
      for (C e = y; e > 0; e >>= 1, b *= b)
        if (e & 1) r *= b;
      return r;
    }
  }));
}

// ---- where, clamp -------------------------------------------------------------------------

std::vector<TensorMeta> meta_where(const Args& a) {
  COIL_CHECK(a.is_tensor(0) && a.tensor(0).dtype() == kBool, "where: condition must be a bool ",
             "tensor, got ", describe_arg(a, 0), "; compare first (e.g. x > 0)");
  COIL_CHECK(a.is_tensor(1) || a.is_tensor(2) || a.is_tensor(0), "where: needs a tensor");
  Shape shape = broadcast_args(a, {0, 1, 2}, "where");
  Device dev = common_device(a, {0, 1, 2}, "where");
  return one(elementwise_meta(a, {1, 2, 0}, result_type(a, {1, 2}), shape, dev));
}
std::vector<Tensor> eager_where(const Args& a, const std::vector<TensorMeta>& out) {
  DType t = out[0].dtype;
  Tensor c = a.tensor(0), x = operand(a, 1, t), y = operand(a, 2, t);
  Tensor res = empty_from_meta(out[0]);
  dispatch_dtype(t, [&]<typename T>() {
    const bool* pc = c.data_ptr<bool>();
    const T* px = static_cast<const T*>(x.data_ptr());
    const T* py = static_cast<const T*>(y.data_ptr());
    T* po = static_cast<T*>(res.data_ptr());
    const Shape& s = res.sizes();
    for_each_row<4>(
        s,
        {res.strides(), broadcast_strides(c, s), broadcast_strides(x, s), broadcast_strides(y, s)},
        [&](std::array<int64_t, 4> off, int64_t n, std::array<int64_t, 4> st) {
          for (int64_t i = 0; i < n; ++i)
            po[off[0] + i * st[0]] =
                pc[off[1] + i * st[1]] ? px[off[2] + i * st[2]] : py[off[3] + i * st[3]];
        });
  });
  return one(res);
}

std::vector<TensorMeta> meta_clamp(const Args& a) {
  COIL_CHECK(!a.is_none(1) || !a.is_none(2), "clamp: at least one of min and max must be given");
  const Tensor& x = a.tensor(0);
  COIL_CHECK(x.dtype() != kBool, "clamp: not supported on bool tensors (got ", describe(x), ")");
  return one(elementwise_meta(a, {0}, result_type(a, {0, 1, 2}), x.sizes(), x.device()));
}
std::vector<Tensor> eager_clamp(const Args& a, const std::vector<TensorMeta>& out) {
  DType t = out[0].dtype;
  Tensor x = as_dtype(a.tensor(0), t);
  auto lo = a.opt_scalar(1), hi = a.opt_scalar(2);
  return one(unary_apply<false>(x, out[0], t, [&](auto v) {
    using C = decltype(v);
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(v)) return v;
    }
    if (lo && v < lo->to<C>()) v = lo->to<C>();
    if (hi && v > hi->to<C>()) v = hi->to<C>();
    return v;
  }));
}

}  // namespace coil::ops
