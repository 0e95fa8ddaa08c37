// Reductions and scans: sum, mean, prod, amax/amin, argmax/argmin, var/std, logsumexp, any/all
// and cumsum, with PyTorch's dtype rules and edge cases (empty reductions, NaN, 0-dim inputs).
// The loops live in reduce_engine.h, the per-op arithmetic in reduce_reducers.h.
#include "ops/meta_util.h"
#include "ops/reduce_engine.h"
#include "ops/reduce_reducers.h"

namespace coil::ops {

namespace {

using reduce::reduce_into;

// Sorted, wrapped dims of a reduction; [] means all dims.
Shape reduced_dims(const Args& a, const char* op) {
  return wrap_dims(a.ints(1), a.tensor(0).dim(), op);
}

TensorMeta reduction_meta(const Tensor& x, const Shape& rdims, bool keepdim, DType dtype) {
  Shape sizes;
  for (int64_t d = 0; d < x.dim(); ++d) {
    bool reduced = std::find(rdims.begin(), rdims.end(), d) != rdims.end();
    if (!reduced)
      sizes.push_back(x.size(d));
    else if (keepdim)
      sizes.push_back(1);
  }
  return contiguous_meta(dtype, sizes, x.device());
}

// sum/prod of integers and bool give int64, as in PyTorch.
DType widened_integral(DType t) { return is_integral(t, true) ? kInt64 : t; }

void check_floating(const Tensor& x, const char* op, const char* what) {
  COIL_CHECK(is_floating(x.dtype()), op, "(): ", what, " Got: ", describe(x),
             "; convert the input with .to(coil::kFloat32) first");
}

// amax/amin/argmax have no value to give for an empty reduction.
void check_nonempty_dims(const Tensor& x, const Shape& rdims, const char* op) {
  for (int64_t d : rdims)
    COIL_CHECK(x.size(d) != 0, op, "(): Expected reduction dim ", d,
               " to have non-zero size, but the input is ", describe(x),
               "; reduce over dims that are not empty");
}

// Which input element types a reducer is built for: only those its op's meta function lets
// reach it (a sum to int64 takes integers, a variance floats), so the build does not
// instantiate loops no call can run.
template <typename T>
struct AnyInput : std::true_type {};
template <typename T>
struct FloatInput : std::bool_constant<reduce::kIsFloat<T>> {};
template <typename T>
struct IntegerInput : std::bool_constant<!reduce::kIsFloat<T>> {};
template <typename T>
struct ByteInput : std::is_same<T, uint8_t> {};

// Runs reducer Red<T> (T the input's element type, one that Input admits) over x into a new
// tensor of meta `m`.
template <template <typename> class Red, template <typename> class Input = AnyInput,
          typename... Extra>
Tensor run_reduction(const Tensor& x, const Shape& rdims, const TensorMeta& m, Extra... extra) {
  Tensor out = empty_from_meta(m);
  dispatch_dtype(x.dtype(), [&]<typename T>() {
    if constexpr (Input<T>::value)
      reduce_into<T>(x, rdims, out, Red<T>{extra...});
    else
      throw InternalError("reduction: no kernel for input " + std::string(dtype_name(x.dtype())));
  });
  return out;
}

template <typename T>
using Sum = reduce::SumProd<T, T, false>;
template <typename T>
using SumToLong = reduce::SumProd<T, int64_t, false>;
template <typename T>
using Prod = reduce::SumProd<T, T, true>;
template <typename T>
using ProdToLong = reduce::SumProd<T, int64_t, true>;
template <typename T>
using Amax = reduce::MinMax<T, true>;
template <typename T>
using Amin = reduce::MinMax<T, false>;
template <typename T>
using Argmax = reduce::ArgMinMax<T, true>;
template <typename T>
using Argmin = reduce::ArgMinMax<T, false>;
template <typename T>
using Var = reduce::VarStd<T, false>;
template <typename T>
using Std = reduce::VarStd<T, true>;
template <typename T>
using LogSumExpSame = reduce::LogSumExp<T, T>;
template <typename T>
using LogSumExpFloat = reduce::LogSumExp<T, float>;
template <typename T>
using AnyBool = reduce::AnyAll<T, bool, false>;
template <typename T>
using AnyByte = reduce::AnyAll<T, uint8_t, false>;
template <typename T>
using AllBool = reduce::AnyAll<T, bool, true>;
template <typename T>
using AllByte = reduce::AnyAll<T, uint8_t, true>;

}  // namespace

// ---- sum, prod, mean --------------------------------------------------------------------------

std::vector<TensorMeta> meta_sum(const Args& a) {
  const Tensor& x = a.tensor(0);
  DType dtype = a.opt_dtype(3).value_or(widened_integral(x.dtype()));
  return one(reduction_meta(x, reduced_dims(a, "sum"), a.b(2), dtype));
}
// With dtype= the input is cast first, as in PyTorch.
std::vector<Tensor> eager_sum(const Args& a, const std::vector<TensorMeta>& out) {
  Tensor x = a.opt_dtype(3) ? as_dtype(a.tensor(0), out[0].dtype) : a.tensor(0);
  Shape rdims = reduced_dims(a, "sum");
  if (x.dtype() == out[0].dtype) return one(run_reduction<Sum>(x, rdims, out[0]));
  return one(run_reduction<SumToLong, IntegerInput>(x, rdims, out[0]));
}

std::vector<TensorMeta> meta_prod(const Args& a) {
  const Tensor& x = a.tensor(0);
  return one(reduction_meta(x, reduced_dims(a, "prod"), a.b(2), widened_integral(x.dtype())));
}
std::vector<Tensor> eager_prod(const Args& a, const std::vector<TensorMeta>& out) {
  const Tensor& x = a.tensor(0);
  Shape rdims = reduced_dims(a, "prod");
  if (x.dtype() == out[0].dtype) return one(run_reduction<Prod>(x, rdims, out[0]));
  return one(run_reduction<ProdToLong, IntegerInput>(x, rdims, out[0]));
}

std::vector<TensorMeta> meta_mean(const Args& a) {
  const Tensor& x = a.tensor(0);
  check_floating(x, "mean",
                 "could not infer output dtype. Input dtype must be either a floating point or "
                 "complex dtype.");
  return one(reduction_meta(x, reduced_dims(a, "mean"), a.b(2), x.dtype()));
}
std::vector<Tensor> eager_mean(const Args& a, const std::vector<TensorMeta>& out) {
  return one(run_reduction<reduce::Mean, FloatInput>(a.tensor(0), reduced_dims(a, "mean"), out[0]));
}

// ---- amax, amin ---------------------------------------------------------------------------------

#define COIL_MINMAX(name, Red)                                                          \
  std::vector<TensorMeta> meta_##name(const Args& a) {                                  \
    const Tensor& x = a.tensor(0);                                                      \
    Shape rdims = reduced_dims(a, #name);                                               \
    check_nonempty_dims(x, rdims, #name);                                               \
    return one(reduction_meta(x, rdims, a.b(2), x.dtype()));                            \
  }                                                                                     \
  std::vector<Tensor> eager_##name(const Args& a, const std::vector<TensorMeta>& out) { \
    return one(run_reduction<Red>(a.tensor(0), reduced_dims(a, #name), out[0]));        \
  }
COIL_MINMAX(amax, Amax)
COIL_MINMAX(amin, Amin)
#undef COIL_MINMAX

// ---- argmax, argmin -----------------------------------------------------------------------------

namespace {

// dim=None reduces the flattened input (keepdim then keeps every dim as size 1).
Shape arg_dims(const Args& a, const char* op) {
  const Tensor& x = a.tensor(0);
  if (auto dim = a.opt_i64(1)) return wrap_dims({*dim}, x.dim(), op);
  return wrap_dims({}, x.dim(), op);
}

TensorMeta arg_meta(const Args& a, const char* op) {
  const Tensor& x = a.tensor(0);
  Shape rdims = arg_dims(a, op);
  if (a.opt_i64(1)) {
    check_nonempty_dims(x, rdims, op);
  } else {
    COIL_CHECK(x.numel() != 0, op,
               "(): Expected reduction dim to be specified for input.numel() == 0, but the input "
               "is ",
               describe(x), "; pass dim= to reduce over a non-empty dim");
  }
  return reduction_meta(x, rdims, a.b(2), kInt64);
}

}  // namespace

std::vector<TensorMeta> meta_argmax(const Args& a) { return one(arg_meta(a, "argmax")); }
std::vector<Tensor> eager_argmax(const Args& a, const std::vector<TensorMeta>& out) {
  return one(run_reduction<Argmax>(a.tensor(0), arg_dims(a, "argmax"), out[0]));
}
std::vector<TensorMeta> meta_argmin(const Args& a) { return one(arg_meta(a, "argmin")); }
std::vector<Tensor> eager_argmin(const Args& a, const std::vector<TensorMeta>& out) {
  return one(run_reduction<Argmin>(a.tensor(0), arg_dims(a, "argmin"), out[0]));
}

// ---- var, std -----------------------------------------------------------------------------------

#define COIL_VARSTD(name, Red)                                                                  \
  std::vector<TensorMeta> meta_##name(const Args& a) {                                          \
    const Tensor& x = a.tensor(0);                                                              \
    check_floating(x, #name, "std and var only support floating point and complex dtypes.");    \
    return one(reduction_meta(x, reduced_dims(a, #name), a.b(3), x.dtype()));                   \
  }                                                                                             \
  std::vector<Tensor> eager_##name(const Args& a, const std::vector<TensorMeta>& out) {         \
    return one(                                                                                 \
        run_reduction<Red, FloatInput>(a.tensor(0), reduced_dims(a, #name), out[0], a.f64(2))); \
  }
COIL_VARSTD(var, Var)
COIL_VARSTD(std, Std)
#undef COIL_VARSTD

// ---- logsumexp ----------------------------------------------------------------------------------

// Integer and bool inputs give float32 (PyTorch converts them to the default dtype).
std::vector<TensorMeta> meta_logsumexp(const Args& a) {
  const Tensor& x = a.tensor(0);
  return one(reduction_meta(x, reduced_dims(a, "logsumexp"), a.b(2), float_result(x.dtype())));
}
std::vector<Tensor> eager_logsumexp(const Args& a, const std::vector<TensorMeta>& out) {
  const Tensor& x = a.tensor(0);
  Shape rdims = reduced_dims(a, "logsumexp");
  if (x.dtype() == out[0].dtype)
    return one(run_reduction<LogSumExpSame, FloatInput>(x, rdims, out[0]));
  return one(run_reduction<LogSumExpFloat, IntegerInput>(x, rdims, out[0]));
}

// ---- any, all -----------------------------------------------------------------------------------

// bool results, except uint8 inputs keep uint8 (PyTorch's NumPy-compatible exception).
#define COIL_ANYALL(name, RedBool, RedByte)                                             \
  std::vector<TensorMeta> meta_##name(const Args& a) {                                  \
    const Tensor& x = a.tensor(0);                                                      \
    DType dtype = x.dtype() == kUInt8 ? kUInt8 : kBool;                                 \
    return one(reduction_meta(x, reduced_dims(a, #name), a.b(2), dtype));               \
  }                                                                                     \
  std::vector<Tensor> eager_##name(const Args& a, const std::vector<TensorMeta>& out) { \
    Shape rdims = reduced_dims(a, #name);                                               \
    if (out[0].dtype == kUInt8)                                                         \
      return one(run_reduction<RedByte, ByteInput>(a.tensor(0), rdims, out[0]));        \
    return one(run_reduction<RedBool>(a.tensor(0), rdims, out[0]));                     \
  }
COIL_ANYALL(any, AnyBool, AnyByte)
COIL_ANYALL(all, AllBool, AllByte)
#undef COIL_ANYALL

// ---- cumsum -------------------------------------------------------------------------------------

namespace {

// Running sums along the middle dim of a contiguous (outer, len, inner) tensor, accumulated in
// double (floating) or wrapping int64 (integers).
template <typename T>
void cumsum_contiguous(const T* in, T* out, int64_t outer, int64_t len, int64_t inner) {
  using Acc = std::conditional_t<reduce::kIsFloat<T>, double, uint64_t>;
  auto widen = [](T v) {
    if constexpr (reduce::kIsFloat<T>)
      return static_cast<double>(reduce::load(v));
    else
      return static_cast<uint64_t>(static_cast<int64_t>(v));
  };
  auto narrow = [](Acc a) {
    if constexpr (reduce::kIsFloat<T>)
      return convert<T>(a);
    else
      return convert<T>(static_cast<int64_t>(a));
  };
  bool parallel = outer * len * inner >= kParallelGrain;
  if (inner == 1) {  // each row is one contiguous scan
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t o = 0; o < outer; ++o) {
      Acc acc = 0;
      for (int64_t i = 0; i < len; ++i) {
        acc += widen(in[o * len + i]);
        out[o * len + i] = narrow(acc);
      }
    }
    return;
  }
  // Each work item scans a strip of up to kStrip neighbouring inner positions, reading and
  // writing rows contiguously.
  constexpr int64_t kStrip = 256;
  int64_t strips = (inner + kStrip - 1) / kStrip, items = outer * strips;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t item = 0; item < items; ++item) {
    int64_t o = item / strips, j0 = (item % strips) * kStrip, w = std::min(kStrip, inner - j0);
    Acc acc[kStrip] = {};
    for (int64_t i = 0; i < len; ++i) {
      const T* src = in + (o * len + i) * inner + j0;
      T* dst = out + (o * len + i) * inner + j0;
      for (int64_t j = 0; j < w; ++j) {
        acc[j] += widen(src[j]);
        dst[j] = narrow(acc[j]);
      }
    }
  }
}

}  // namespace

// Integer and bool inputs give int64 unless dtype= says otherwise; the input is cast to the
// result dtype first, as in PyTorch.
std::vector<TensorMeta> meta_cumsum(const Args& a) {
  const Tensor& x = a.tensor(0);
  wrap_dim(a.i64(1), x.dim(), "cumsum");
  DType dtype = a.opt_dtype(2).value_or(widened_integral(x.dtype()));
  return one(contiguous_meta(dtype, x.sizes(), x.device()));
}
std::vector<Tensor> eager_cumsum(const Args& a, const std::vector<TensorMeta>& out) {
  Tensor x = as_dtype(a.tensor(0), out[0].dtype);
  if (!x.is_contiguous()) x = contiguous_copy(x);
  Tensor res = empty_from_meta(out[0]);
  if (x.numel() == 0) return one(res);
  int64_t dim = wrap_dim(a.i64(1), x.dim(), "cumsum");
  int64_t outer = 1, len = x.dim() == 0 ? 1 : x.size(dim), inner = 1;
  for (int64_t d = 0; d < x.dim(); ++d) (d < dim ? outer : inner) *= d == dim ? 1 : x.size(d);
  dispatch_dtype(x.dtype(), [&]<typename T>() {
    cumsum_contiguous(x.data_ptr<T>(), res.data_ptr<T>(), outer, len, inner);
  });
  return one(res);
}

}  // namespace coil::ops
