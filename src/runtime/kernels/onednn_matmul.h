// float32 matrix products through oneDNN, whose just-in-time kernels pick the CPU's best
// instructions at run time and, unlike OpenBLAS here, keep a batch of mid-sized products
// (attention's 8 x 256x256x64) busy on every core. Measured on the 16-core device machine:
// see docs/performance.md.
#pragma once

#include <cstdint>

#include "runtime/kernels/epilogue.h"

namespace coil {

// One operand of a batch of matrices: element (b, i, j) at data[b*batch + i*row + j*col].
struct StridedMats {
  const float* data;
  int64_t batch, row, col;  // strides, in elements
};

// Whether onednn_matmul computes `e` in its kernel exactly as coil defines it: the gelus, not
// relu (oneDNN's gives -0.0 for a negative x, computing x * slope 0).
bool onednn_fuses(Epilogue e);

// C[b] = epilogue(A[b] @ B[b]) (or epilogue(C[b] + A[b] @ B[b]) when `accumulate`) for
// b < batch, A m x k, B k x n, C with row stride ldc, column stride 1 and batch stride
// c_batch. Returns false, touching nothing, when oneDNN cannot take the product (its
// strides, or an epilogue it does not fuse); the caller then uses BLAS.
bool onednn_matmul(int64_t batch, int64_t m, int64_t n, int64_t k, StridedMats a, StridedMats b,
                   float* c, int64_t c_batch, int64_t ldc, bool accumulate,
                   Epilogue epilogue = Epilogue::none);

}  // namespace coil
