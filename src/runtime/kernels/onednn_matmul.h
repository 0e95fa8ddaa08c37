// float32 matrix products through oneDNN, whose just-in-time kernels pick the CPU's best
// instructions at run time and, unlike OpenBLAS here, keep a batch of mid-sized products
// (attention's 8 x 256x256x64) busy on every core (measured: docs/performance.md).
#pragma once

#include <cstdint>

namespace coil {

// One operand of a batch of matrices: element (b, i, j) at data[b*batch + i*row + j*col].
struct StridedMats {
  const float* data;
  int64_t batch, row, col;  // strides, in elements
};

// C[b] = A[b] @ B[b] (+ C[b] when `accumulate`) (+ row_bias, n elements added to each row,
// when given) for b < batch, A m x k, B k x n, C with row stride ldc, column stride 1 and
// batch stride c_batch. Returns false, touching nothing, when oneDNN cannot take the product
// (its strides); the caller then uses BLAS.
bool onednn_matmul(int64_t batch, int64_t m, int64_t n, int64_t k, StridedMats a, StridedMats b,
                   float* c, int64_t c_batch, int64_t ldc, bool accumulate,
                   const float* row_bias = nullptr);

}  // namespace coil
