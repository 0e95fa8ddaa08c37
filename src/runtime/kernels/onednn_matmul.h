// Matrix products through oneDNN, whose just-in-time kernels pick the CPU's best instructions
// at run time and, unlike OpenBLAS here, keep a batch of mid-sized products (attention's
// 8 x 256x256x64) busy on every core (measured: docs/performance.md): float32, and the 16-bit
// floats where the CPU has kernels for them (bfloat16 on AVX-512 and AMX, accumulating in
// float32 and rounding the result once).
#pragma once

#include <cstdint>

#include <coil/dtype.h>

namespace coil {

// One operand of a batch of matrices: element (b, i, j) at data[b*batch + i*row + j*col].
struct StridedMats {
  const void* data;
  int64_t batch, row, col;  // strides, in elements
};

// C[b] = A[b] @ B[b] (+ C[b] when `accumulate`) (+ row_bias, n elements added to each row,
// when given) for b < batch, A m x k, B k x n, C with row stride ldc, column stride 1 and
// batch stride c_batch, every operand of `dtype`. Returns false, touching nothing, when oneDNN
// cannot take the product (its strides, a dtype this CPU has no kernel for); the caller then
// uses BLAS.
bool onednn_matmul(DType dtype, int64_t batch, int64_t m, int64_t n, int64_t k, StridedMats a,
                   StridedMats b, void* c, int64_t c_batch, int64_t ldc, bool accumulate,
                   const void* row_bias = nullptr);

}  // namespace coil
