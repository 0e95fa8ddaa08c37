// float32 matrix products through oneDNN, whose just-in-time kernels pick the CPU's best
// instructions at run time and, unlike OpenBLAS here, keep a batch of mid-sized products
// (attention's 8 x 256x256x64) busy on every core. Measured on the 16-core device machine:
// see docs/performance.md.
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

// A product made for one thread, for each thread of a parallel region to run on its own
// block of a larger computation (attention's blocks of query rows): A m x k @ B k x n into C
// with row stride ldc and column stride 1, the operands' strides fixed, their addresses
// given with each run. Each thread runs it with a scratchpad of its own.
struct OnednnThreadProduct {
  const void* prepared = nullptr;
  explicit operator bool() const { return prepared != nullptr; }
};

// The product for this geometry (a.data and b.data are not read), made once per geometry;
// empty where oneDNN cannot take it, or when called inside a parallel region, where it must
// not be made.
OnednnThreadProduct onednn_thread_product(int64_t m, int64_t n, int64_t k, StridedMats a,
                                          StridedMats b, int64_t ldc);

// Runs `p` on the calling thread. Returns false where oneDNN failed; it throws nothing, as a
// parallel region must not.
bool run_on_this_thread(const OnednnThreadProduct& p, const float* a, const float* b, float* c);

}  // namespace coil
