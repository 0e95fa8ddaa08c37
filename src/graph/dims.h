// Dimension and dtype rules every layer that reads op arguments shares: wrapping negative
// dims, normalising reduction dims, PyTorch's result_type, and whether a new shape can view
// an old layout. The meta functions of src/ops/, the decompositions, autograd's rules and
// lowering all call these, so they live with the graph's argument types.
#pragma once

#include <initializer_list>
#include <optional>

#include "graph/arg.h"

namespace coil {

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// Sorted, wrapped, duplicate-free reduction dims; {} means all dims.
Shape wrap_dims(const Shape& dims, int64_t ndim, const char* op);

// PyTorch's result_type over the tensor-or-number arguments at `idx`: dimensioned tensors
// lead, then zero-dim tensors, then plain numbers, each only when of a higher category.
DType result_type(const Args& a, std::initializer_list<size_t> idx);

// Strides that let `new_shape` view memory laid out as (old_shape, old_strides), if any
// (PyTorch's computeStride: dims may regroup only within contiguous chunks).
std::optional<Shape> view_strides(const Shape& old_shape, const Shape& old_strides,
                                  const Shape& new_shape);

}  // namespace coil
