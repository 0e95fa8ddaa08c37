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

// Whether onednn_matmul_this_thread reads a rows x cols operand in place: it needs a unit
// stride in one of its dims.
bool onednn_reads_in_place(int64_t rows, int64_t cols, const StridedMats& m);

// C = A @ B on the calling thread, for use inside a parallel region (each thread its own
// block of a larger computation): oneDNN's sgemm, which runs on one thread there. A is m x k
// and B k x n, C has row stride ldc and column stride 1. Returns false when an operand cannot
// be read in place or oneDNN fails; it throws nothing, as a parallel region must not.
bool onednn_matmul_this_thread(int64_t m, int64_t n, int64_t k, StridedMats a, StridedMats b,
                               float* c, int64_t ldc);

}  // namespace coil
