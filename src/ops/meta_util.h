// Helpers shared by the meta functions and kernels of src/ops/: dimension wrapping, type
// promotion, broadcasting, and messages that name shapes the way graph annotations do.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "graph/op_impl.h"
#include "runtime/copy.h"
#include "runtime/dispatch_dtype.h"
#include "runtime/loops.h"

namespace coil::ops {

// "f32[2, 3]"; for a plain-number argument, its value.
std::string describe(const Tensor& t);
std::string describe_arg(const Args& a, size_t i);

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// Sorted, wrapped, duplicate-free reduction dims; {} means all dims.
Shape wrap_dims(const Shape& dims, int64_t ndim, const char* op);

// Strides that let `new_shape` view memory laid out as (old_shape, old_strides), if any
// (PyTorch's computeStride: dims may regroup only within contiguous chunks).
std::optional<Shape> view_strides(const Shape& old_shape, const Shape& old_strides,
                                  const Shape& new_shape);

TensorMeta contiguous_meta(DType dtype, const Shape& sizes, Device device = kCPU);
inline std::vector<TensorMeta> one(TensorMeta m) { return {std::move(m)}; }
inline std::vector<Tensor> one(Tensor t) { return {std::move(t)}; }

// PyTorch's result_type over the tensor-or-number arguments at `idx`: dimensioned tensors
// lead, then zero-dim tensors, then plain numbers, each only when of a higher category.
DType result_type(const Args& a, std::initializer_list<size_t> idx);
Shape broadcast_args(const Args& a, std::initializer_list<size_t> idx, const char* op);
Device common_device(const Args& a, std::initializer_list<size_t> idx, const char* op);

// Argument i as a tensor of `dtype` (converted if needed; a plain number becomes 0-dim).
Tensor operand(const Args& a, size_t i, DType dtype);
// The tensor argument converted to dtype (a copy only when the dtype differs).
Tensor as_dtype(const Tensor& t, DType dtype);

// A floating dtype for ops like exp: the input's own, or float32 for integers and bool.
inline DType float_result(DType t) { return is_floating(t) ? t : kFloat32; }

}  // namespace coil::ops
