#include "ops/meta_util.h"

#include <algorithm>

namespace coil::ops {

std::string describe(const Tensor& t) {
  return std::string(dtype_short_name(t.dtype())) + shape_str(t.sizes());
}

std::string describe_arg(const Args& a, size_t i) {
  if (a.is_tensor(i)) return describe(a.tensor(i));
  return format_literal(a[i]);
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);
  COIL_CHECK(dim >= -n && dim < n, op, ": dim ", dim, " is out of range for a tensor with ", ndim,
             " dims (expected a dim in [", -n, ", ", n - 1, "])");
  return dim < 0 ? dim + n : dim;
}

Shape wrap_dims(const Shape& dims, int64_t ndim, const char* op) {
  Shape out;
  if (dims.empty()) {
    for (int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) {
    int64_t w = ndim == 0 ? (wrap_dim(d, 0, op), 0) : wrap_dim(d, ndim, op);
    if (ndim == 0) continue;
    COIL_CHECK(std::find(out.begin(), out.end(), w) == out.end(), op, ": dim ", d,
               " appears more than once in ", shape_str(dims));
    out.push_back(w);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TensorMeta contiguous_meta(DType dtype, const Shape& sizes, Device device) {
  return TensorMeta{dtype, sizes, contiguous_strides(sizes), 0, device};
}

namespace {
// PyTorch's combine_categories: the higher-priority dtype wins unless the lower one is of a
// higher category.
DType combine(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return *lower;
  if (!lower) return *higher;
  if (is_floating(*higher)) return *higher;
  if (*higher == kBool || is_floating(*lower)) return promote_types(*higher, *lower);
  return *higher;
}
void update(std::optional<DType>& acc, DType t) { acc = acc ? promote_types(*acc, t) : t; }
}  // namespace

DType result_type(const Args& a, std::initializer_list<size_t> idx) {
  std::optional<DType> dimmed, zero_dim, wrapped;
  for (size_t i : idx) {
    if (a.is_none(i)) continue;
    if (a.is_tensor(i)) {
      const Tensor& t = a.tensor(i);
      update(t.dim() > 0 ? dimmed : zero_dim, t.dtype());
    } else {
      update(wrapped, a.scalar(i).default_dtype());
    }
  }
  std::optional<DType> lower;
  if (zero_dim || wrapped) lower = combine(zero_dim, wrapped);
  COIL_ASSERT(dimmed || lower, "result_type of no operands");
  return combine(dimmed, lower);
}

Shape broadcast_args(const Args& a, std::initializer_list<size_t> idx, const char* op) {
  Shape out;
  for (size_t i : idx)
    if (a.is_tensor(i)) out = broadcast_shapes(out, a.tensor(i).sizes(), op);
  return out;
}

Device common_device(const Args& a, std::initializer_list<size_t> idx, const char* op) {
  std::optional<Device> dev;
  for (size_t i : idx) {
    if (!a.is_tensor(i)) continue;
    Device d = a.tensor(i).device();
    COIL_CHECK(!dev || *dev == d, op, ": expected all tensors on one device, but found ",
               dev->str(), " and ", d.str(), "; move them with .to(device)");
    dev = d;
  }
  return dev.value_or(kCPU);
}

Tensor as_dtype(const Tensor& t, DType dtype) {
  return t.dtype() == dtype ? t : to_dtype_copy(t, dtype);
}

Tensor operand(const Args& a, size_t i, DType dtype) {
  if (a.is_tensor(i)) return as_dtype(a.tensor(i), dtype);
  Tensor t = empty_contiguous({}, dtype);
  fill(t, a.scalar(i));
  return t;
}

}  // namespace coil::ops
