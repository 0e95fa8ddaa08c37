// The runtime's basic data movement: copy with conversion and broadcasting, fill.
#pragma once

#include "runtime/tensor_impl.h"

namespace coil {

// dst[...] = convert(src[...]), src broadcast to dst's shape.
void copy_into(const Tensor& dst, const Tensor& src);
Tensor to_dtype_copy(const Tensor& src, DType dtype);  // always a new contiguous tensor
Tensor contiguous_copy(const Tensor& src);             // always a new contiguous tensor
// `t` itself when it is contiguous, else contiguous_copy(t).
inline Tensor as_contiguous(const Tensor& t) { return t.is_contiguous() ? t : contiguous_copy(t); }
void fill(const Tensor& dst, const Scalar& value);

}  // namespace coil
