// Matrix products: mm, bmm, addmm, matmul (torch.matmul's 1-D/2-D/N-D rules with batch
// broadcasting) and linear. All of them end in batched_product, which hands strided operands to
// BLAS in place (src/runtime/kernels/gemm.h).
#include <algorithm>
#include <optional>

#include "ops/linalg_util.h"
#include "runtime/kernels/gemm.h"

namespace coil::ops {

// ---- shared helpers ---------------------------------------------------------------------------

MatOperand mat_operand(const Tensor& t, bool vector_as_row) {
  MatOperand m{t.data_ptr(), t.sizes(), t.strides()};
  if (t.dim() == 1) {
    // A unit dim's stride is never read; 0 keeps it out of the way.
    m.sizes = vector_as_row ? Shape{1, t.size(0)} : Shape{t.size(0), 1};
    m.strides = vector_as_row ? Shape{0, t.stride(0)} : Shape{t.stride(0), 0};
  }
  return m;
}

MatOperand transposed(MatOperand m) {
  size_t r = m.sizes.size();
  std::swap(m.sizes[r - 2], m.sizes[r - 1]);
  std::swap(m.strides[r - 2], m.strides[r - 1]);
  return m;
}

bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  return true;
}

void check_product_dtypes(const char* op, const Tensor& a, const Tensor& b) {
  COIL_CHECK(a.dtype() == b.dtype(), op,
             ": expected both operands to have the same dtype (products do not promote), but got ",
             describe(a), " and ", describe(b), "; convert one with .to(", dtype_name(a.dtype()),
             ") or .to(", dtype_name(b.dtype()), ")");
  COIL_CHECK(a.dtype() != kBool, op, ": not supported for bool tensors (got ", describe(a), " and ",
             describe(b), "); convert them to a number dtype first, e.g. .to(int64)");
}

namespace {

MatRef mat_ref(const MatOperand& m, const void* data) {
  size_t r = m.sizes.size();
  return MatRef{data, m.strides[r - 2], m.strides[r - 1]};
}

// The operand's batch strides as seen from the output's batch shape (0 where it broadcasts).
Shape batch_strides(const MatOperand& m, const Shape& batch) {
  size_t own = m.sizes.size() - 2;
  Shape st(batch.size(), 0);
  for (size_t i = 0; i < own; ++i) {
    size_t d = batch.size() - own + i;
    if (m.sizes[i] != 1) st[d] = m.strides[i];
  }
  return st;
}

// When a's batch dims and rows are one evenly strided run, the whole batch is a single
// (batch * m) x k matrix: one large GEMM instead of many small ones (linear on (B, T, in)).
// Returns that run's row stride.
std::optional<int64_t> folded_row_stride(const MatOperand& a, const Shape& batch,
                                         const Shape& a_batch_strides) {
  Shape sizes = batch, strides = a_batch_strides;
  sizes.push_back(a.sizes[a.sizes.size() - 2]);
  strides.push_back(a.strides[a.strides.size() - 2]);
  std::optional<int64_t> inner;  // stride of the innermost non-unit dim so far
  int64_t expected = 0;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] == 1) continue;
    if (inner && strides[d] != expected) return std::nullopt;
    if (!inner) inner = strides[d];
    expected = strides[d] * sizes[d];
  }
  if (inner && *inner == 0) return std::nullopt;
  return inner.value_or(0);
}

}  // namespace

std::vector<int64_t> batch_offsets(const MatOperand& m, const Shape& batch) {
  Shape strides = batch_strides(m, batch);
  std::vector<int64_t> off(static_cast<size_t>(numel_of(batch)));
  Shape idx(batch.size(), 0);
  int64_t o = 0;
  for (int64_t& entry : off) {  // walking the batch index like an odometer
    entry = o;
    for (size_t d = batch.size(); d-- > 0;) {
      if (++idx[d] < batch[d]) {
        o += strides[d];
        break;
      }
      o -= strides[d] * (batch[d] - 1);
      idx[d] = 0;
    }
  }
  return off;
}

void batched_product(const Tensor& out, const Shape& batch, const MatOperand& a,
                     const MatOperand& b, bool accumulate) {
  int64_t m = a.sizes[a.sizes.size() - 2], k = a.sizes.back(), n = b.sizes.back();
  int64_t count = numel_of(batch);
  if (count == 0 || m == 0 || n == 0) return;
  DType dt = out.dtype();
  void* c = out.data_ptr();
  Shape a_bs = batch_strides(a, batch), b_bs = batch_strides(b, batch);

  bool b_shared = std::all_of(b_bs.begin(), b_bs.end(), [](int64_t s) { return s == 0; });
  if (b_shared) {
    if (auto rs = folded_row_stride(a, batch, a_bs)) {
      MatRef ar{a.data, *rs, a.strides.back()};
      gemm(dt, count * m, n, k, ar, mat_ref(b, b.data), c, n, accumulate);
      return;
    }
  }
  gemm_batched(dt, m, n, k, mat_ref(a, a.data), batch_offsets(a, batch), mat_ref(b, b.data),
               batch_offsets(b, batch), c, m * n, n, accumulate);
}

namespace {

void check_inner(const char* op, const Tensor& a, const Tensor& b, int64_t ka, int64_t kb) {
  COIL_CHECK(ka == kb, op, ": cannot multiply ", describe(a), " by ", describe(b), ": inner sizes ",
             ka, " and ", kb, " differ");
}

// The broadcast of two batch shapes, or an error naming both operands.
Shape broadcast_batch(const char* op, const Tensor& a, const Shape& ba, const Tensor& b,
                      const Shape& bb) {
  size_t n = std::max(ba.size(), bb.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - ba.size() ? 1 : ba[i - (n - ba.size())];
    int64_t y = i < n - bb.size() ? 1 : bb[i - (n - bb.size())];
    COIL_CHECK(x == y || x == 1 || y == 1, op, ": the batch dims ", shape_str(ba), " of ",
               describe(a), " and ", shape_str(bb), " of ", describe(b),
               " cannot be broadcast together; batch sizes must match or be 1");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

Shape leading(const Tensor& t, int64_t drop) {
  return Shape(t.sizes().begin(), t.sizes().end() - std::min<int64_t>(drop, t.dim()));
}

Shape concat(Shape a, const Shape& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// matmul's output geometry: the broadcast batch and the result's sizes, with the dims that
// 1-D operands contributed removed again.
struct MatmulShape {
  Shape batch;
  Shape out;
};

MatmulShape matmul_shape(const Tensor& x, const Tensor& y) {
  COIL_CHECK(x.dim() >= 1 && y.dim() >= 1,
             "matmul: both arguments need to be at least 1-D, but got ", describe(x), " and ",
             describe(y), "; multiply by a 0-dim tensor with mul instead");
  check_product_dtypes("matmul", x, y);
  int64_t ky = y.dim() == 1 ? y.size(0) : y.size(-2);
  check_inner("matmul", x, y, x.size(-1), ky);
  Shape batch = broadcast_batch("matmul", x, leading(x, 2), y, leading(y, 2));
  Shape out = batch;
  if (x.dim() >= 2) out.push_back(x.size(-2));
  if (y.dim() >= 2) out.push_back(y.size(-1));
  return {batch, out};
}

}  // namespace

// ---- mm, bmm, addmm -----------------------------------------------------------------------------

std::vector<TensorMeta> meta_mm(const Args& a) {
  const Tensor &x = a.tensor(0), &y = a.tensor(1);
  COIL_CHECK(x.dim() == 2 && y.dim() == 2, "mm: expected two 2-D matrices, got ", describe(x),
             " and ", describe(y), "; use matmul for vectors and batches");
  check_product_dtypes("mm", x, y);
  check_inner("mm", x, y, x.size(1), y.size(0));
  return one(contiguous_meta(x.dtype(), {x.size(0), y.size(1)}, common_device(a, {0, 1}, "mm")));
}
std::vector<Tensor> eager_mm(const Args& a, const std::vector<TensorMeta>& out) {
  Tensor r = empty_from_meta(out[0]);
  batched_product(r, {}, mat_operand(a.tensor(0), true), mat_operand(a.tensor(1), false), false);
  return one(r);
}

std::vector<TensorMeta> meta_bmm(const Args& a) {
  const Tensor &x = a.tensor(0), &y = a.tensor(1);
  COIL_CHECK(x.dim() == 3 && y.dim() == 3,
             "bmm: expected two 3-D tensors (batch, rows, cols), got ", describe(x), " and ",
             describe(y), "; use matmul to broadcast batch dims");
  check_product_dtypes("bmm", x, y);
  COIL_CHECK(x.size(0) == y.size(0), "bmm: batch sizes ", x.size(0), " and ", y.size(0), " of ",
             describe(x), " and ", describe(y), " differ; use matmul to broadcast them");
  check_inner("bmm", x, y, x.size(2), y.size(1));
  return one(contiguous_meta(x.dtype(), {x.size(0), x.size(1), y.size(2)},
                             common_device(a, {0, 1}, "bmm")));
}
std::vector<Tensor> eager_bmm(const Args& a, const std::vector<TensorMeta>& out) {
  Tensor r = empty_from_meta(out[0]);
  batched_product(r, {r.size(0)}, mat_operand(a.tensor(0), true), mat_operand(a.tensor(1), false),
                  false);
  return one(r);
}

std::vector<TensorMeta> meta_addmm(const Args& a) {
  const Tensor &bias = a.tensor(0), &x = a.tensor(1), &y = a.tensor(2);
  COIL_CHECK(x.dim() == 2 && y.dim() == 2, "addmm: expected 2-D matrices mat1 and mat2, got ",
             describe(x), " and ", describe(y));
  check_product_dtypes("addmm", x, y);
  check_product_dtypes("addmm", bias, x);
  check_inner("addmm", x, y, x.size(1), y.size(0));
  Shape sizes{x.size(0), y.size(1)};
  COIL_CHECK(broadcasts_to(bias.sizes(), sizes), "addmm: the added tensor ", describe(bias),
             " cannot broadcast to the product's shape ", shape_str(sizes));
  return one(contiguous_meta(x.dtype(), sizes, common_device(a, {0, 1, 2}, "addmm")));
}
std::vector<Tensor> eager_addmm(const Args& a, const std::vector<TensorMeta>& out) {
  Tensor r = empty_from_meta(out[0]);
  const Tensor& bias = a.tensor(0);
  MatOperand x = mat_operand(a.tensor(1), true), y = mat_operand(a.tensor(2), false);
  // A bias along the rows (a Linear layer's, [n] or [1, n]) goes to the library with the
  // product, which adds it in its kernel (oneDNN) or stores it first; any other broadcast is
  // copied into the result for the product to accumulate on.
  const int64_t m = r.size(0), n = r.size(1), k = x.sizes.back();
  if (bias.dtype() == r.dtype() && bias.numel() == n && bias.dim() >= 1 && bias.size(-1) == n &&
      (bias.stride(-1) == 1 || n == 1)) {
    gemm(r.dtype(), m, n, k, mat_ref(x, x.data), mat_ref(y, y.data), r.data_ptr(), n, false,
         bias.data_ptr());
    return one(r);
  }
  copy_into(r, bias);
  batched_product(r, {}, x, y, true);
  return one(r);
}

// ---- matmul, linear
// ------------------------------------------------------------------------------

std::vector<TensorMeta> meta_matmul(const Args& a) {
  MatmulShape s = matmul_shape(a.tensor(0), a.tensor(1));
  return one(contiguous_meta(a.tensor(0).dtype(), s.out, common_device(a, {0, 1}, "matmul")));
}
std::vector<Tensor> eager_matmul(const Args& a, const std::vector<TensorMeta>& out) {
  const Tensor &x = a.tensor(0), &y = a.tensor(1);
  Tensor r = empty_from_meta(out[0]);
  batched_product(r, matmul_shape(x, y).batch, mat_operand(x, true), mat_operand(y, false), false);
  return one(r);
}

// linear(x, W, b) = x @ W^T + b: W^T is read in place, and x's leading dims fold into one GEMM
// when its layout allows.
std::vector<TensorMeta> meta_linear(const Args& a) {
  const Tensor &x = a.tensor(0), &w = a.tensor(1);
  Tensor bias = a.opt_tensor(2);
  COIL_CHECK(x.dim() >= 1, "linear: the input must be at least 1-D (..., in_features), got ",
             describe(x));
  COIL_CHECK(w.dim() == 2, "linear: the weight must be 2-D (out_features, in_features), got ",
             describe(w));
  check_product_dtypes("linear", x, w);
  COIL_CHECK(x.size(-1) == w.size(1), "linear: the input ", describe(x), " has ", x.size(-1),
             " features but the weight ", describe(w), " expects ", w.size(1),
             " (weight is (out_features, in_features))");
  Shape sizes = concat(leading(x, 1), {w.size(0)});
  if (bias.defined()) {
    check_product_dtypes("linear", x, bias);
    COIL_CHECK(broadcasts_to(bias.sizes(), sizes), "linear: the bias ", describe(bias),
               " cannot broadcast to the output's shape ", shape_str(sizes),
               "; it is usually 1-D (out_features)");
  }
  return one(contiguous_meta(x.dtype(), sizes, common_device(a, {0, 1, 2}, "linear")));
}
std::vector<Tensor> eager_linear(const Args& a, const std::vector<TensorMeta>& out) {
  const Tensor &x = a.tensor(0), &w = a.tensor(1);
  Tensor bias = a.opt_tensor(2);
  Tensor r = empty_from_meta(out[0]);
  if (bias.defined()) copy_into(r, bias);
  batched_product(r, leading(x, 2), mat_operand(x, true), transposed(mat_operand(w, true)),
                  bias.defined());
  return one(r);
}

}  // namespace coil::ops
