// The runtime's basic data movement: copy with conversion and broadcasting, fill.
#pragma once

#include "runtime/tensor_impl.h"

namespace coil {

// dst[...] = convert(src[...]), src broadcast to dst's shape.
void copy_into(const Tensor& dst, const Tensor& src);
Tensor to_dtype_copy(const Tensor& src, DType dtype);  // always a new contiguous tensor
Tensor contiguous_copy(const Tensor& src);             // always a new contiguous tensor
void fill(const Tensor& dst, const Scalar& value);

}  // namespace coil
