#include "graph/dims.h"

#include <algorithm>

#include <coil/error.h>

#include "runtime/tensor_impl.h"

namespace coil {

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

std::optional<Shape> view_strides(const Shape& old_shape, const Shape& old_strides,
                                  const Shape& new_shape) {
  Shape strides(new_shape.size());
  if (old_shape.empty() || numel_of(old_shape) == 0) return contiguous_strides(new_shape);
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t chunk_base = old_strides.back(), tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_shape[d];
    if (d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        strides[view_d] = view_numel * chunk_base;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base = old_strides[d - 1];
        tensor_numel = view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return strides;
}

}  // namespace coil
