// Helpers shared by the meta functions and kernels of src/ops/ (with graph/dims.h): broadcasting,
// and messages that name shapes the way graph annotations do.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "graph/dims.h"
#include "graph/op_impl.h"
#include "runtime/copy.h"
#include "runtime/dispatch_dtype.h"
#include "runtime/loops.h"

namespace coil::ops {

// "f32[2, 3]"; for a plain-number argument, its value.
std::string describe(const Tensor& t);
std::string describe_arg(const Args& a, size_t i);

TensorMeta contiguous_meta(DType dtype, const Shape& sizes, Device device = kCPU);
// The meta of a result shaped `sizes` computed element by element from the tensors at `idx`:
// on the CPU, channels-last when the first of them of that shape is (as torch keeps its inputs'
// layout); contiguous otherwise (the GPU's kernels write contiguous results).
TensorMeta elementwise_meta(const Args& a, std::initializer_list<size_t> idx, DType dtype,
                            const Shape& sizes, Device device);
// `m` laid out channels-last when `like` is (on the CPU, as elementwise_meta).
TensorMeta layout_like(TensorMeta m, const Tensor& like);
// `m` (4-D) laid out channels-last when `a` or `b` is: a convolution's result and its input's
// gradient, a pool's result.
TensorMeta channels_last_if(TensorMeta m, const Tensor& a, const Tensor& b);
// `m` dense with its dims in the order of `like_strides` (one per dim; largest outermost, ties
// keeping the dims' order), as torch's empty_like lays out a result like a permuted input.
TensorMeta dense_in_order_of(TensorMeta m, const Shape& like_strides);
inline std::vector<TensorMeta> one(TensorMeta m) { return {std::move(m)}; }
inline std::vector<Tensor> one(Tensor t) { return {std::move(t)}; }

Shape broadcast_args(const Args& a, std::initializer_list<size_t> idx, const char* op);
Device common_device(const Args& a, std::initializer_list<size_t> idx, const char* op);

// Argument i as a tensor of `dtype` (converted if needed; a plain number becomes 0-dim).
Tensor operand(const Args& a, size_t i, DType dtype);
// The tensor argument converted to dtype (a copy only when the dtype differs).
Tensor as_dtype(const Tensor& t, DType dtype);

// A floating dtype for ops like exp: the input's own, or float32 for integers and bool.
inline DType float_result(DType t) { return is_floating(t) ? t : kFloat32; }

}  // namespace coil::ops
