// Matrix products for the eager kernels: the one place coil calls BLAS (OpenBLAS's cblas,
// the OpenMP build, so BLAS and coil's own loops share one thread pool).
#pragma once

#include <cstdint>
#include <vector>

#include <coil/dtype.h>

namespace coil {

// A matrix operand: element (i, j) lies at data[i * row_stride + j * col_stride] (strides in
// elements; any strides, including 0 for broadcast dims).
struct MatRef {
  const void* data;
  int64_t row_stride;
  int64_t col_stride;
};

// C = A @ B, or C += A @ B when `accumulate`, for A (m x k), B (k x n) and C (m x n) with row
// stride ldc and column stride 1, all of `dtype`; with `row_bias` (n elements, not with
// accumulate), C = row_bias + A @ B, each row of C getting the bias: oneDNN, where it takes
// the product, adds the bias in its kernel; other paths store it into C first.
// - float32/float64: cblas_sgemm/dgemm; an operand with a unit stride goes to BLAS in place
//   (transpose flag and leading dimension), any other is packed first.
// - float16/bfloat16: converted to float32, sgemm, converted back.
// - integer dtypes: an exact loop with two's-complement wrap-around, as PyTorch's CPU mm.
// Bool is rejected by the meta functions; reaching here with it is an InternalError.
void gemm(DType dtype, int64_t m, int64_t n, int64_t k, MatRef a, MatRef b, void* c, int64_t ldc,
          bool accumulate = false, const void* row_bias = nullptr);

// Independent products of the same geometry: product i reads A at a.data + a_offsets[i] and B
// at b.data + b_offsets[i] (in elements) and writes C at c + i * c_batch_stride. Small products
// run in parallel over the batch; large ones one after another, each on every thread.
void gemm_batched(DType dtype, int64_t m, int64_t n, int64_t k, MatRef a,
                  const std::vector<int64_t>& a_offsets, MatRef b,
                  const std::vector<int64_t>& b_offsets, void* c, int64_t c_batch_stride,
                  int64_t ldc, bool accumulate = false);

}  // namespace coil
