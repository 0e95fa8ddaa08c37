// Shared by the matrix-product, convolution and attention kernels: batched products over
// strided operands (no copies: BLAS reads them in place where it can), and the checks every
// product op makes.
#pragma once

#include <array>
#include <vector>

#include "ops/meta_util.h"

namespace coil::ops {

// A (batched) matrix operand read in place: sizes and strides of [batch..., rows, cols].
struct MatOperand {
  const void* data;
  Shape sizes;
  Shape strides;
};

// `t` as a matrix operand; a 1-D `t` becomes a row (1 x k) or a column (k x 1).
MatOperand mat_operand(const Tensor& t, bool vector_as_row);
// The same memory read as the transposed matrix (swapped rows and cols).
MatOperand transposed(MatOperand m);

// The element offset of each matrix of `m` in the batch `batch` (m's batch dims broadcast to
// it), in row-major batch order.
std::vector<int64_t> batch_offsets(const MatOperand& m, const Shape& batch);

// out = a @ b (out += a @ b when accumulate): a is [..., m, k], b is [..., k, n], their batch
// dims broadcast to `batch`, and out is contiguous with batch_numel * m * n elements.
void batched_product(const Tensor& out, const Shape& batch, const MatOperand& a,
                     const MatOperand& b, bool accumulate);

// Whether `from` broadcasts to `to` without growing it (trailing dims equal or 1).
bool broadcasts_to(const Shape& from, const Shape& to);

// Both operands of a product share one dtype (PyTorch does not promote here) that is not bool.
void check_product_dtypes(const char* op, const Tensor& a, const Tensor& b);

// A conv/pool parameter given as one int (both spatial dims) or two (height, width), as torch
// accepts; anything else is an error naming the op and the parameter.
std::array<int64_t, 2> spatial_pair(const Shape& v, const char* op, const char* name);

}  // namespace coil::ops
