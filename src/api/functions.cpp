// The public free functions of coil/ops.h: each boxes its arguments and calls the op through
// the dispatcher (so capture and autograd see every call).
#include <coil/autograd.h>
#include <coil/ops.h>

#include "graph/registry.h"
#include "graph/sym_node.h"
#include <cmath>

#include "runtime/copy.h"
#include "runtime/loops.h"

namespace coil {

namespace {
Arg dev(Device d) { return d; }
// The factories that took no device before name it only off the CPU, so graphs read as before.
Arg dev_or_none(Device d) { return d.is_cpu() ? Arg() : Arg(d); }
}  // namespace

// ---- factories ---------------------------------------------------------------------------------
Tensor empty(const Shape& size, DType dtype, Device device) {
  for (int64_t s : size) COIL_CHECK(s >= 0, "empty: negative dimension in size ", shape_str(size));
  return empty_contiguous(size, dtype, device);
}
Tensor empty_strided(const Shape& size, const Shape& stride, DType dtype, Device device) {
  return empty_from_meta(TensorMeta{dtype, size, stride, 0, device});
}
Tensor full(const Shape& size, const Scalar& v, std::optional<DType> dtype, Device device) {
  return call_op1(OpId::full, {size, v, none_or(dtype), dev(device)});
}
Tensor zeros(const Shape& size, DType dtype, Device device) { return full(size, 0, dtype, device); }
Tensor full_symint(const SymInts& size, const Scalar& v, DType dtype, Device device) {
  return call_op1(OpId::full, {symints_arg(size), v, dtype, dev(device)});
}
Tensor arange_symint(const SymInt& end, std::optional<DType> dtype, Device device) {
  if (!end.is_symbolic()) return arange(end.hint(), dtype, device);
  return call_op1(OpId::arange, {Scalar(int64_t{0}), symint_arg(end), Scalar(int64_t{1}),
                                 none_or(dtype), dev_or_none(device)});
}
Tensor zeros_symint(const SymInts& size, DType dtype, Device device) {
  return full_symint(size, 0, dtype, device);
}
Tensor ones(const Shape& size, DType dtype, Device device) { return full(size, 1, dtype, device); }
Tensor arange(const Scalar& end, std::optional<DType> dtype, Device device) {
  return arange(0, end, 1, dtype, device);
}
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step,
              std::optional<DType> dtype, Device device) {
  return call_op1(OpId::arange, {start, end, step, none_or(dtype), dev_or_none(device)});
}
Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, DType dtype, Device device) {
  return call_op1(OpId::linspace, {start, end, steps, dtype, dev_or_none(device)});
}
Tensor eye(int64_t n, std::optional<int64_t> m, DType dtype, Device device) {
  return call_op1(OpId::eye, {n, none_or(m), dtype, dev_or_none(device)});
}
Tensor rand(const Shape& size, DType dtype, Device device) {
  return call_op1(OpId::rand, {size, dtype, dev_or_none(device)});
}
Tensor randn(const Shape& size, DType dtype, Device device) {
  return call_op1(OpId::randn, {size, dtype, dev_or_none(device)});
}
Tensor randint(int64_t low, int64_t high, const Shape& size, DType dtype, Device device) {
  return call_op1(OpId::randint, {low, high, size, dtype, dev_or_none(device)});
}
Tensor randint(int64_t high, const Shape& size, DType dtype, Device device) {
  return randint(0, high, size, dtype, device);
}
Tensor empty_like(const Tensor& t) { return empty(t.sizes(), t.dtype(), t.device()); }
Tensor zeros_like(const Tensor& t) { return full_symint(t.sym_sizes(), 0, t.dtype(), t.device()); }
// The *_like factories take the sizes as they are: symbolic in a dynamic capture.
Tensor ones_like(const Tensor& t) { return full_symint(t.sym_sizes(), 1, t.dtype(), t.device()); }
Tensor full_like(const Tensor& t, const Scalar& v) {
  return full_symint(t.sym_sizes(), v, t.dtype(), t.device());
}
Tensor rand_like(const Tensor& t) {
  return call_op1(OpId::rand, {symints_arg(t.sym_sizes()), t.dtype(), dev(t.device())});
}
Tensor randn_like(const Tensor& t) {
  return call_op1(OpId::randn, {symints_arg(t.sym_sizes()), t.dtype(), dev(t.device())});
}

Tensor from_blob(void* data, const Shape& sizes, DType dtype) {
  return from_blob(data, sizes, contiguous_strides(sizes), dtype);
}
Tensor from_blob(void* data, const Shape& sizes, const Shape& strides, DType dtype) {
  COIL_CHECK(data != nullptr || numel_of(sizes) == 0, "from_blob: data is null");
  COIL_CHECK(sizes.size() == strides.size(), "from_blob: sizes ", shape_str(sizes), " and strides ",
             shape_str(strides), " must have the same length");
  auto storage = std::make_shared<Storage>();
  storage->data = data;
  int64_t extent = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    COIL_CHECK(sizes[i] >= 0 && strides[i] >= 0, "from_blob: negative size or stride");
    extent += (sizes[i] - 1) * strides[i];
  }
  storage->nbytes = static_cast<size_t>(std::max<int64_t>(extent, 0)) * itemsize(dtype);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->meta = TensorMeta{dtype, sizes, strides, 0, kCPU};
  return Tensor(std::move(impl));
}

template <typename T>
Tensor tensor(const std::vector<T>& values, std::optional<Shape> sizes) {
  Shape s = sizes.value_or(Shape{static_cast<int64_t>(values.size())});
  COIL_CHECK(numel_of(s) == static_cast<int64_t>(values.size()), "tensor: ", values.size(),
             " values do not fill sizes ", shape_str(s));
  using Stored = std::conditional_t<std::is_same_v<T, int>, int32_t, T>;
  Tensor out = empty_contiguous(s, dtype_of<Stored>);
  Stored* p = static_cast<Stored*>(out.data_ptr());
  for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<Stored>(values[i]);
  return out;
}
template Tensor tensor(const std::vector<float>&, std::optional<Shape>);
template Tensor tensor(const std::vector<double>&, std::optional<Shape>);
template Tensor tensor(const std::vector<int64_t>&, std::optional<Shape>);
template Tensor tensor(const std::vector<int32_t>&, std::optional<Shape>);
template Tensor tensor(const std::vector<uint8_t>&, std::optional<Shape>);
template Tensor tensor(const std::vector<int8_t>&, std::optional<Shape>);
template Tensor tensor(const std::vector<Half>&, std::optional<Shape>);
template Tensor tensor(const std::vector<BFloat16>&, std::optional<Shape>);
template <>
Tensor tensor(const std::vector<bool>& values, std::optional<Shape> sizes) {
  Shape s = sizes.value_or(Shape{static_cast<int64_t>(values.size())});
  COIL_CHECK(numel_of(s) == static_cast<int64_t>(values.size()), "tensor: ", values.size(),
             " values do not fill sizes ", shape_str(s));
  Tensor out = empty_contiguous(s, kBool);
  bool* p = out.data_ptr<bool>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return out;
}

Tensor scalar_tensor(const Scalar& value, std::optional<DType> dtype, Device device) {
  return full({}, value, dtype.value_or(value.default_dtype()), device);
}

// ---- pointwise ---------------------------------------------------------------------------------
#define COIL_UNARY_FN(name) \
  Tensor name(const Tensor& x) { return call_op1(OpId::name, {x}); }
COIL_UNARY_FN(neg)
COIL_UNARY_FN(abs)
COIL_UNARY_FN(sign)
COIL_UNARY_FN(exp)
COIL_UNARY_FN(exp2)
COIL_UNARY_FN(expm1)
COIL_UNARY_FN(log)
COIL_UNARY_FN(log2)
COIL_UNARY_FN(log1p)
COIL_UNARY_FN(sqrt)
COIL_UNARY_FN(rsqrt)
COIL_UNARY_FN(reciprocal)
COIL_UNARY_FN(sin)
COIL_UNARY_FN(cos)
COIL_UNARY_FN(tan)
COIL_UNARY_FN(tanh)
COIL_UNARY_FN(sigmoid)
COIL_UNARY_FN(relu)
COIL_UNARY_FN(silu)
COIL_UNARY_FN(erf)
COIL_UNARY_FN(floor)
COIL_UNARY_FN(ceil)
COIL_UNARY_FN(round)
COIL_UNARY_FN(trunc)
COIL_UNARY_FN(logical_not)
COIL_UNARY_FN(isnan)
COIL_UNARY_FN(isinf)
COIL_UNARY_FN(clone)
#undef COIL_UNARY_FN
Tensor gelu(const Tensor& x, const std::string& approximate) {
  return call_op1(OpId::gelu, {x, approximate});
}

#define COIL_BINARY_FN(name, op)                                                       \
  Tensor name(const Tensor& a, const Tensor& b) { return call_op1(OpId::op, {a, b}); } \
  Tensor name(const Tensor& a, const Scalar& b) { return call_op1(OpId::op, {a, b}); } \
  Tensor name(const Scalar& a, const Tensor& b) { return call_op1(OpId::op, {a, b}); }
COIL_BINARY_FN(add, add)
COIL_BINARY_FN(sub, sub)
COIL_BINARY_FN(mul, mul)
COIL_BINARY_FN(div, div)
COIL_BINARY_FN(pow, pow)
COIL_BINARY_FN(remainder, remainder)
COIL_BINARY_FN(maximum, maximum)
COIL_BINARY_FN(minimum, minimum)
COIL_BINARY_FN(atan2, atan2)
COIL_BINARY_FN(eq, eq)
COIL_BINARY_FN(ne, ne)
COIL_BINARY_FN(lt, lt)
COIL_BINARY_FN(le, le)
COIL_BINARY_FN(gt, gt)
COIL_BINARY_FN(ge, ge)
COIL_BINARY_FN(logical_and, logical_and)
COIL_BINARY_FN(logical_or, logical_or)
#undef COIL_BINARY_FN
Tensor floor_divide(const Tensor& a, const Tensor& b) {
  return call_op1(OpId::div, {a, b, std::string("floor")});
}
Tensor floor_divide(const Tensor& a, const Scalar& b) {
  return call_op1(OpId::div, {a, b, std::string("floor")});
}
Tensor floor_divide(const Scalar& a, const Tensor& b) {
  return call_op1(OpId::div, {a, b, std::string("floor")});
}
Tensor div(const Tensor& a, const Tensor& b, std::optional<std::string> rounding_mode) {
  return call_op1(OpId::div, {a, b, none_or(rounding_mode)});
}
Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) {
  return call_op1(OpId::where, {c, a, b});
}
Tensor where(const Tensor& c, const Tensor& a, const Scalar& b) {
  return call_op1(OpId::where, {c, a, b});
}
Tensor where(const Tensor& c, const Scalar& a, const Tensor& b) {
  return call_op1(OpId::where, {c, a, b});
}
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  return call_op1(OpId::clamp, {x, none_or(min), none_or(max)});
}
Tensor clamp_min(const Tensor& x, const Scalar& min) { return clamp(x, min, std::nullopt); }
Tensor clamp_max(const Tensor& x, const Scalar& max) { return clamp(x, std::nullopt, max); }

Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator!(const Tensor& x) { return logical_not(x); }
#define COIL_OPERATOR_FN(sym, fn)                                            \
  Tensor operator sym(const Tensor& a, const Tensor& b) { return fn(a, b); } \
  Tensor operator sym(const Tensor& a, const Scalar& b) { return fn(a, b); } \
  Tensor operator sym(const Scalar& a, const Tensor& b) { return fn(a, b); }
COIL_OPERATOR_FN(+, add)
COIL_OPERATOR_FN(-, sub)
COIL_OPERATOR_FN(*, mul)
COIL_OPERATOR_FN(/, div)
COIL_OPERATOR_FN(%, remainder)
COIL_OPERATOR_FN(==, eq)
COIL_OPERATOR_FN(!=, ne)
COIL_OPERATOR_FN(<, lt)
COIL_OPERATOR_FN(<=, le)
COIL_OPERATOR_FN(>, gt)
COIL_OPERATOR_FN(>=, ge)
COIL_OPERATOR_FN(&&, logical_and)
COIL_OPERATOR_FN(||, logical_or)
#undef COIL_OPERATOR_FN

// ---- reductions -------------------------------------------------------------------------------
Tensor sum(const Tensor& x, const Shape& dims, bool keepdim, std::optional<DType> dtype) {
  return call_op1(OpId::sum, {x, dims, keepdim, none_or(dtype)});
}
#define COIL_REDUCE_FN(name)                                      \
  Tensor name(const Tensor& x, const Shape& dims, bool keepdim) { \
    return call_op1(OpId::name, {x, dims, keepdim});              \
  }
COIL_REDUCE_FN(mean)
COIL_REDUCE_FN(prod)
COIL_REDUCE_FN(amax)
COIL_REDUCE_FN(amin)
COIL_REDUCE_FN(logsumexp)
COIL_REDUCE_FN(any)
COIL_REDUCE_FN(all)
#undef COIL_REDUCE_FN
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return call_op1(OpId::argmax, {x, none_or(dim), keepdim});
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return call_op1(OpId::argmin, {x, none_or(dim), keepdim});
}
Tensor var(const Tensor& x, const Shape& dims, double correction, bool keepdim) {
  return call_op1(OpId::var, {x, dims, correction, keepdim});
}
Tensor std(const Tensor& x, const Shape& dims, double correction, bool keepdim) {
  return call_op1(OpId::std, {x, dims, correction, keepdim});
}
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return call_op1(OpId::cumsum, {x, dim, none_or(dtype)});
}

// ---- nn
// ------------------------------------------------------------------------------------------
Tensor softmax(const Tensor& x, int64_t dim) { return call_op1(OpId::softmax, {x, dim}); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return call_op1(OpId::log_softmax, {x, dim}); }
Tensor layer_norm(const Tensor& x, const Shape& shape, const Tensor& w, const Tensor& b,
                  double eps) {
  return call_op1(OpId::layer_norm, {x, shape, none_or(w), none_or(b), eps});
}
Tensor rms_norm(const Tensor& x, const Shape& shape, const Tensor& w, std::optional<double> eps) {
  return call_op1(OpId::rms_norm, {x, shape, none_or(w), none_or(eps)});
}
Tensor batch_norm(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& rm,
                  const Tensor& rv, bool training, double momentum, double eps) {
  if (training && (rm.defined() || rv.defined()) && x.dim() >= 2 && x.numel() > 0 &&
      (current_dispatch_hook() || !x.device().is_cpu())) {
    // Being captured: the update of the running statistics, a side effect of the eager kernel,
    // is recorded as ops and in-place copies instead, which capture turns into extra results
    // written back after each call. The normalisation itself then decomposes and fuses like
    // any other op rather than running the eager kernel inside the compiled graph. On a GPU,
    // eagerly, the same: the eager kernel is the CPU's (its input copied there and back).
    Tensor y = batch_norm(x, w, b, Tensor(), Tensor(), true, momentum, eps);
    NoGradGuard no_grad;
    Shape dims{0};
    for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
    if (rm.defined()) rm.copy_(rm * (1 - momentum) + mean(x, dims) * momentum);
    if (rv.defined()) rv.copy_(rv * (1 - momentum) + var(x, dims, /*correction=*/1) * momentum);
    return y;
  }
  return call_op1(OpId::batch_norm,
                  {x, none_or(w), none_or(b), none_or(rm), none_or(rv), training, momentum, eps});
}
Tensor group_norm(const Tensor& x, int64_t groups, const Tensor& w, const Tensor& b, double eps) {
  return call_op1(OpId::group_norm, {x, groups, none_or(w), none_or(b), eps});
}
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  return call_op1(OpId::linear, {x, w, none_or(b)});
}
Tensor matmul(const Tensor& a, const Tensor& b) { return call_op1(OpId::matmul, {a, b}); }
Tensor mm(const Tensor& a, const Tensor& b) { return call_op1(OpId::mm, {a, b}); }
Tensor bmm(const Tensor& a, const Tensor& b) { return call_op1(OpId::bmm, {a, b}); }
Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b) {
  return call_op1(OpId::addmm, {bias, a, b});
}
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Shape& stride,
              const Shape& padding, const Shape& dilation, int64_t groups) {
  return call_op1(OpId::conv2d, {x, w, none_or(b), stride, padding, dilation, groups});
}
Tensor max_pool2d(const Tensor& x, const Shape& k, const Shape& s, const Shape& p, const Shape& d,
                  bool ceil_mode) {
  return call_op1(OpId::max_pool2d, {x, k, s, p, d, ceil_mode});
}
Tensor avg_pool2d(const Tensor& x, const Shape& k, const Shape& s, const Shape& p, bool ceil_mode,
                  bool count_include_pad) {
  return call_op1(OpId::avg_pool2d, {x, k, s, p, ceil_mode, count_include_pad});
}
Tensor adaptive_avg_pool2d(const Tensor& x, const Shape& output_size) {
  return call_op1(OpId::adaptive_avg_pool2d, {x, output_size});
}
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx) {
  return call_op1(OpId::embedding, {weight, indices, padding_idx});
}
Tensor dropout(const Tensor& x, double p, bool train) {
  return call_op1(OpId::dropout, {x, p, train});
}
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const std::string& reduction,
                     int64_t ignore_index, double label_smoothing) {
  return call_op1(OpId::cross_entropy, {logits, target, reduction, ignore_index, label_smoothing});
}
Tensor nll_loss(const Tensor& lp, const Tensor& target, const std::string& reduction,
                int64_t ignore_index) {
  return call_op1(OpId::nll_loss, {lp, target, reduction, ignore_index});
}
Tensor mse_loss(const Tensor& x, const Tensor& target, const std::string& reduction) {
  return call_op1(OpId::mse_loss, {x, target, reduction});
}
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale) {
  return call_op1(OpId::scaled_dot_product_attention,
                  {q, k, v, none_or(mask), dropout_p, is_causal, none_or(scale)});
}

// ---- shape
// ---------------------------------------------------------------------------------------
Tensor cat(const std::vector<Tensor>& ts, int64_t dim) { return call_op1(OpId::cat, {ts, dim}); }
Tensor stack(const std::vector<Tensor>& ts, int64_t dim) {
  return call_op1(OpId::stack, {ts, dim});
}
std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim) {
  return call_op(OpId::split, {x, size, dim});
}
std::vector<Tensor> split(const Tensor& x, const Shape& sizes, int64_t dim) {
  return call_op(OpId::split_with_sizes, {x, sizes, dim});
}
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  return call_op(OpId::chunk, {x, chunks, dim});
}
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  return call_op1(OpId::gather, {x, dim, index});
}
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  return call_op1(OpId::index_select, {x, dim, index});
}
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return call_op1(OpId::scatter_add, {x, dim, index, src});
}
Tensor pad(const Tensor& x, const Shape& p, const std::string& mode, double value) {
  return call_op1(OpId::pad, {x, p, mode, value});
}
Tensor repeat(const Tensor& x, const Shape& r) { return call_op1(OpId::repeat, {x, r}); }
Tensor flip(const Tensor& x, const Shape& dims) { return call_op1(OpId::flip, {x, dims}); }
Tensor tril(const Tensor& x, int64_t diagonal) { return call_op1(OpId::tril, {x, diagonal}); }
Tensor triu(const Tensor& x, int64_t diagonal) { return call_op1(OpId::triu, {x, diagonal}); }

// ---- comparison helpers -------------------------------------------------------------------------
bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  Shape shape = broadcast_shapes(a.sizes(), b.sizes(), "allclose");
  Tensor x = empty_contiguous(shape, kFloat64), y = empty_contiguous(shape, kFloat64);
  copy_into(x, a);
  copy_into(y, b);
  const double* px = x.data_ptr<double>();
  const double* py = y.data_ptr<double>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    double u = px[i], v = py[i];
    if (std::isnan(u) || std::isnan(v)) {
      if (!(equal_nan && std::isnan(u) && std::isnan(v))) return false;
      continue;
    }
    if (u == v) continue;  // equal infinities
    if (!(std::fabs(u - v) <= atol + rtol * std::fabs(v))) return false;
  }
  return true;
}

bool equal(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes()) return false;
  return a.to_vector_double() == b.to_vector_double();
}

}  // namespace coil
