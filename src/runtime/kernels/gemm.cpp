#include "runtime/kernels/gemm.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <optional>
#include <string>
#include <type_traits>

#include <coil/error.h>

#include "runtime/dispatch_dtype.h"
#include "runtime/kernels/blas.h"
#include "runtime/kernels/onednn_matmul.h"
#include "support/config.h"

namespace coil {

namespace {

// Products below this many multiply-adds are too small for BLAS to split across threads, so
// a batch of them is better split over the batch.
constexpr int64_t kSmallProduct = int64_t{1} << 21;
// Below this many multiply-adds in all, a parallel region costs more than it saves.
constexpr int64_t kParallelWork = int64_t{1} << 16;
// From this many multiply-adds on, floating products go to oneDNN (onednn_matmul.h says why);
// below, calling a library costs more than the product.
constexpr int64_t kOnednnWork = int64_t{1} << 15;

// Which library takes a single float32 product: oneDNN (its brgemm kernels, generated once per
// shape at small cost; its jit gemm for the largest, onednn_matmul.cpp) unless
// COIL_MATMUL_LIBRARY=openblas. oneDNN is the faster of the two at every workload shape and at
// GPT-2's (measured: docs/performance.md); the switch is there to compare them. A
// batch of products always goes to oneDNN, which spreads one batch over every core.
bool onednn_for_single_products() {
  static const bool onednn = [] {
    const std::string library = config::text(config::Var::MatmulLibrary).value_or("");
    COIL_CHECK(library.empty() || library == "openblas" || library == "onednn",
               "COIL_MATMUL_LIBRARY='", library,
               "' is not a matrix-product library coil calls: set it to 'onednn' (the "
               "default) or 'openblas', or leave it unset");
    return library != "openblas";
  }();
  return onednn;
}

// How BLAS reads a row-major operand: A itself (NoTrans, element (i, j) at i * ld + j) or the
// transpose of a stored matrix (Trans, element (i, j) at j * ld + i).
struct BlasLayout {
  CBLAS_TRANSPOSE trans;
  int64_t ld;
};

// The layout that reads a rows x cols operand in place, if its strides allow one. A unit
// dim's stride never matters; BLAS requires max(1, stored row length) <= ld, and its 32-bit
// interface ld <= INT_MAX.
std::optional<BlasLayout> blas_layout(int64_t rows, int64_t cols, const MatRef& m) {
  auto fits = [](int64_t ld, int64_t row_len) {
    return ld >= std::max<int64_t>(row_len, 1) && ld <= INT_MAX;
  };
  if (cols == 1 || m.col_stride == 1) {
    int64_t ld = rows == 1 ? std::max<int64_t>(cols, 1) : m.row_stride;
    if (fits(ld, cols)) return BlasLayout{CblasNoTrans, ld};
  }
  if (rows == 1 || m.row_stride == 1) {
    int64_t ld = cols == 1 ? std::max<int64_t>(rows, 1) : m.col_stride;
    if (fits(ld, rows)) return BlasLayout{CblasTrans, ld};
  }
  return std::nullopt;
}

// A row-major copy of a strided operand, converted to Out.
template <typename Out, typename In>
std::vector<Out> pack(int64_t rows, int64_t cols, const MatRef& m) {
  std::vector<Out> buf(static_cast<size_t>(rows * cols));
  const In* p = static_cast<const In*>(m.data);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      buf[i * cols + j] = static_cast<Out>(p[i * m.row_stride + j * m.col_stride]);
  return buf;
}

// Checked before any parallel region: an exception must not escape an OpenMP thread.
void check_blas_dims(int64_t m, int64_t n, int64_t k, int64_t ldc) {
  for (int64_t v : {m, n, k, ldc})
    COIL_CHECK(v <= INT_MAX, "matrix product: size ", v,
               " exceeds the 32-bit BLAS interface's limit of ", INT_MAX,
               "; split the product into smaller pieces");
}

void blas_call(int64_t m, int64_t n, int64_t k, BlasLayout la, const float* a, BlasLayout lb,
               const float* b, float* c, int64_t ldc, bool accumulate) {
  blas().sgemm(CblasRowMajor, la.trans, lb.trans, int(m), int(n), int(k), 1.0f, a, int(la.ld), b,
               int(lb.ld), accumulate ? 1.0f : 0.0f, c, int(ldc));
}
void blas_call(int64_t m, int64_t n, int64_t k, BlasLayout la, const double* a, BlasLayout lb,
               const double* b, double* c, int64_t ldc, bool accumulate) {
  blas().dgemm(CblasRowMajor, la.trans, lb.trans, int(m), int(n), int(k), 1.0, a, int(la.ld), b,
               int(lb.ld), accumulate ? 1.0 : 0.0, c, int(ldc));
}

// y (n) = a (k elements, `inc` apart) times a k x n matrix in BLAS layout `lb`, as gemv: for a
// row-major matrix y = B^T a, for a transposed one (stored n x k) y = S a.
template <typename T>
void gemv_call(int64_t n, int64_t k, BlasLayout lb, const T* b, const T* a, int64_t inc, T* y,
               bool accumulate) {
  const bool rows_are_k = lb.trans == CblasNoTrans;
  const CBLAS_TRANSPOSE trans = rows_are_k ? CblasTrans : CblasNoTrans;
  const int rows = int(rows_are_k ? k : n), cols = int(rows_are_k ? n : k);
  const T beta = accumulate ? T(1) : T(0);
  if constexpr (std::is_same_v<T, float>)
    blas().sgemv(CblasRowMajor, trans, rows, cols, 1.0f, b, int(lb.ld), a, int(inc), beta, y, 1);
  else
    blas().dgemv(CblasRowMajor, trans, rows, cols, 1.0, b, int(lb.ld), a, int(inc), beta, y, 1);
}

// float/double: BLAS straight on the operands where their strides allow, else on a packed copy.
// A single row times a matrix (a decode step's head over a vocabulary, one token at a time) is a
// matrix-vector product: gemm would pack the whole matrix at every call, gemv reads it once.
template <typename T>
void gemm_blas(int64_t m, int64_t n, int64_t k, MatRef a, MatRef b, T* c, int64_t ldc,
               bool accumulate) {
  std::vector<T> a_buf, b_buf;
  std::optional<BlasLayout> la = blas_layout(m, k, a), lb = blas_layout(k, n, b);
  if (m == 1 && lb && a.col_stride > 0 && a.col_stride <= INT_MAX) {
    gemv_call(n, k, *lb, static_cast<const T*>(b.data), static_cast<const T*>(a.data), a.col_stride,
              c, accumulate);
    return;
  }
  if (!la) {
    a_buf = pack<T, T>(m, k, a);
    a = MatRef{a_buf.data(), k, 1};
    la = BlasLayout{CblasNoTrans, k};
  }
  if (!lb) {
    b_buf = pack<T, T>(k, n, b);
    b = MatRef{b_buf.data(), n, 1};
    lb = BlasLayout{CblasNoTrans, n};
  }
  blas_call(m, n, k, *la, static_cast<const T*>(a.data), *lb, static_cast<const T*>(b.data), c, ldc,
            accumulate);
}

// float16/bfloat16: PyTorch accumulates these in float32 too.
template <typename T>
void gemm_reduced(int64_t m, int64_t n, int64_t k, MatRef a, MatRef b, T* c, int64_t ldc,
                  bool accumulate) {
  std::vector<float> af = pack<float, T>(m, k, a), bf = pack<float, T>(k, n, b);
  std::vector<float> cf(static_cast<size_t>(m * n), 0.0f);
  if (accumulate)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) cf[i * n + j] = static_cast<float>(c[i * ldc + j]);
  gemm_blas<float>(m, n, k, MatRef{af.data(), k, 1}, MatRef{bf.data(), n, 1}, cf.data(), n,
                   accumulate);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = T(cf[i * n + j]);
}

// Integers: accumulate in uint64_t, whose wrap-around is defined and equals two's-complement
// arithmetic modulo 2^64; the final narrowing keeps the low bits, as PyTorch's result does.
template <typename T>
void gemm_integer(int64_t m, int64_t n, int64_t k, MatRef a, MatRef b, T* c, int64_t ldc,
                  bool accumulate) {
  const T* pa = static_cast<const T*>(a.data);
  const T* pb = static_cast<const T*>(b.data);
  auto wide = [](T v) { return static_cast<uint64_t>(static_cast<int64_t>(v)); };
  auto row = [&](int64_t i) {
    std::vector<uint64_t> acc(static_cast<size_t>(n), 0);
    if (accumulate)
      for (int64_t j = 0; j < n; ++j) acc[j] = wide(c[i * ldc + j]);
    for (int64_t p = 0; p < k; ++p) {
      uint64_t av = wide(pa[i * a.row_stride + p * a.col_stride]);
      if (av == 0) continue;
      const T* brow = pb + p * b.row_stride;
      for (int64_t j = 0; j < n; ++j) acc[j] += av * wide(brow[j * b.col_stride]);
    }
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = static_cast<T>(acc[j]);
  };
  if (m > 1 && m * n * k >= kParallelWork) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < m; ++i) row(i);
  } else {
    for (int64_t i = 0; i < m; ++i) row(i);
  }
}

bool evenly_spaced(const std::vector<int64_t>& v) {
  for (size_t i = 2; i < v.size(); ++i)
    if (v[i] - v[i - 1] != v[1] - v[0]) return false;
  return v.size() >= 2;
}

}  // namespace

void gemm(DType dtype, int64_t m, int64_t n, int64_t k, MatRef a, MatRef b, void* c, int64_t ldc,
          bool accumulate, const void* row_bias) {
  if (m == 0 || n == 0) return;
  COIL_ASSERT(dtype != kBool, "gemm on bool");
  COIL_ASSERT(!(accumulate && row_bias), "gemm: a row bias and accumulate together");
  check_blas_dims(m, n, k, ldc);
  dispatch_dtype(dtype, [&]<typename T>() {
    T* pc = static_cast<T*>(c);
    if constexpr (std::is_same_v<T, bool>) {
      return;
    } else {
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, Half> ||
                    std::is_same_v<T, BFloat16>) {
        StridedMats sa{a.data, 0, a.row_stride, a.col_stride};
        StridedMats sb{b.data, 0, b.row_stride, b.col_stride};
        // A single row (a decode step's token) goes to BLAS's gemv (gemm_blas), which reads
        // the matrix once at the memory's pace, faster than oneDNN's product of one row
        // (measured: docs/performance.md, GPT-2's decode step on the CPU); the 16-bit floats
        // take oneDNN for one row too, where BLAS would need float32 copies.
        const bool one_row_to_blas = std::is_same_v<T, float> && m == 1;
        if (k > 0 && !one_row_to_blas && m * n * k >= kOnednnWork && onednn_for_single_products() &&
            onednn_matmul(dtype, 1, m, n, k, sa, sb, pc, 0, ldc, accumulate, row_bias))
          return;
      }
      // Every other path adds a row bias by storing it into C first and accumulating on it.
      if (row_bias) {
        const T* rb = static_cast<const T*>(row_bias);
        for (int64_t i = 0; i < m; ++i) std::copy(rb, rb + n, pc + i * ldc);
        accumulate = true;
      }
      if (k == 0) {
        // An empty sum: C keeps its value (accumulate) or becomes zero.
        if (!accumulate)
          for (int64_t i = 0; i < m; ++i) std::fill(pc + i * ldc, pc + i * ldc + n, T(0.0f));
      } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        gemm_blas<T>(m, n, k, a, b, pc, ldc, accumulate);
      } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        gemm_reduced<T>(m, n, k, a, b, pc, ldc, accumulate);
      } else {
        gemm_integer<T>(m, n, k, a, b, pc, ldc, accumulate);
      }
    }
  });
}

void gemm_batched(DType dtype, int64_t m, int64_t n, int64_t k, MatRef a,
                  const std::vector<int64_t>& a_offsets, MatRef b,
                  const std::vector<int64_t>& b_offsets, void* c, int64_t c_batch_stride,
                  int64_t ldc, bool accumulate) {
  COIL_ASSERT(a_offsets.size() == b_offsets.size(), "gemm_batched: offset counts differ");
  int64_t batch = static_cast<int64_t>(a_offsets.size());
  size_t item = itemsize(dtype);
  COIL_ASSERT(dtype != kBool, "gemm on bool");
  check_blas_dims(m, n, k, ldc);
  auto one = [&](int64_t i) {
    MatRef ai{static_cast<const char*>(a.data) + a_offsets[i] * item, a.row_stride, a.col_stride};
    MatRef bi{static_cast<const char*>(b.data) + b_offsets[i] * item, b.row_stride, b.col_stride};
    gemm(dtype, m, n, k, ai, bi, static_cast<char*>(c) + i * c_batch_stride * item, ldc,
         accumulate);
  };
  // A batch with constant strides is one oneDNN call, which spreads it over every core.
  const bool floats = dtype == kFloat32 || dtype == kBFloat16 || dtype == kFloat16;
  if (floats && batch > 1 && batch * m * n * k >= kOnednnWork && evenly_spaced(a_offsets) &&
      evenly_spaced(b_offsets)) {
    auto f = [&](const void* p, const std::vector<int64_t>& off) {
      return static_cast<const char*>(p) + off[0] * static_cast<int64_t>(item);
    };
    StridedMats sa{f(a.data, a_offsets), a_offsets[1] - a_offsets[0], a.row_stride, a.col_stride};
    StridedMats sb{f(b.data, b_offsets), b_offsets[1] - b_offsets[0], b.row_stride, b.col_stride};
    if (onednn_matmul(dtype, batch, m, n, k, sa, sb, c, c_batch_stride, ldc, accumulate)) return;
  }
  // Inside a parallel region OpenBLAS runs single-threaded, so the two levels do not nest.
  if (batch > 1 && m * n * k < kSmallProduct && batch * m * n * k >= kParallelWork) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < batch; ++i) one(i);
  } else {
    for (int64_t i = 0; i < batch; ++i) one(i);
  }
}

}  // namespace coil
