#include "runtime/kernels/attention_backward_block.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <new>
#include <type_traits>
#include <vector>

#include "runtime/kernels/blas.h"
#include "runtime/kernels/softmax_row.h"

namespace coil {

namespace {

// Query rows a block: its weights and their gradient (2 x 64 x n) stay in a core's cache at
// GPT-2's 1024 tokens.
constexpr int64_t kRows = 64;

// C (m x n, row stride ldc) = A B + beta C, A m x k and B k x n, each read transposed when asked.
template <typename T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc) {
  const CBLAS_TRANSPOSE at = ta ? CblasTrans : CblasNoTrans, bt = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    blas().sgemm(CblasRowMajor, at, bt, int(m), int(n), int(k), 1.0f, a, int(lda), b, int(ldb),
                 beta, c, int(ldc));
  else
    blas().dgemm(CblasRowMajor, at, bt, int(m), int(n), int(k), 1.0, a, int(lda), b, int(ldb), beta,
                 c, int(ldc));
}

// x[0, n) = softmax(x * scale) as the forward's rows make it (attention's safe softmax).
template <typename T>
void softmax_in_place(T* x, int64_t n, T scale) {
  if constexpr (std::is_same_v<T, float>) {
    softmax_row(x, n, scale);
  } else {
    T mx = -std::numeric_limits<T>::infinity();
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, x[j] * scale);
    if (mx == -std::numeric_limits<T>::infinity()) {
      std::fill(x, x + n, T(0));
      return;
    }
    T sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += (x[j] = std::exp(x[j] * scale - mx));
    for (int64_t j = 0; j < n; ++j) x[j] /= sum;
  }
}

template <typename T>
bool backward_entry(const AttentionBackwardEntry<T>& a) {
  const int64_t n = a.n, e = a.e;
  std::vector<T> p, dp;
  try {
    p.resize(static_cast<size_t>(std::min(kRows, n) * n));
    dp.resize(p.size());
  } catch (const std::bad_alloc&) {
    return false;
  }
  for (int64_t j = 0; j < n; ++j) {
    std::fill_n(a.dk + j * a.d_row, e, T(0));
    std::fill_n(a.dv + j * a.d_row, e, T(0));
  }
  for (int64_t i0 = 0; i0 < n; i0 += kRows) {
    const int64_t rows = std::min(kRows, n - i0), cols = a.causal ? i0 + rows : n;
    const T *q = a.q + i0 * a.q_row, *g = a.g + i0 * a.g_row;
    gemm<T>(false, true, rows, cols, e, q, a.q_row, a.k, a.k_row, 0, p.data(), cols);
    gemm<T>(false, true, rows, cols, e, g, a.g_row, a.v, a.v_row, 0, dp.data(), cols);
    for (int64_t r = 0; r < rows; ++r) {
      T *pr = p.data() + r * cols, *dr = dp.data() + r * cols;
      const int64_t valid = a.causal ? i0 + r + 1 : cols;
      softmax_in_place(pr, valid, a.scale);
      std::fill(pr + valid, pr + cols, T(0));
      // rowsum(dp * p) is rowsum(g * o): the forward's output row stands for it.
      const T *gr = g + r * a.g_row, *orow = a.o + (i0 + r) * a.o_row;
      T d = 0;
      for (int64_t c = 0; c < e; ++c) d += gr[c] * orow[c];
      for (int64_t j = 0; j < cols; ++j) dr[j] = pr[j] * (dr[j] - d) * a.scale;
    }
    gemm<T>(false, false, rows, e, cols, dp.data(), cols, a.k, a.k_row, 0, a.dq + i0 * a.d_row,
            a.d_row);
    gemm<T>(true, false, cols, e, rows, dp.data(), cols, q, a.q_row, 1, a.dk, a.d_row);
    gemm<T>(true, false, cols, e, rows, p.data(), cols, g, a.g_row, 1, a.dv, a.d_row);
  }
  return true;
}

}  // namespace

bool attention_backward_entry(const AttentionBackwardEntry<float>& a) { return backward_entry(a); }
bool attention_backward_entry(const AttentionBackwardEntry<double>& a) { return backward_entry(a); }

}  // namespace coil
