// scaled_dot_product_attention, as PyTorch's math path: scores = q @ k^T * scale (+ mask),
// a "safe" softmax over the keys (a row with every key masked out gives zeros, not NaN),
// dropout, then @ v. Both products go through batched_product (the matmul library, operands
// read in place); float32 rows without a mask or dropout take the vectorised softmax_row.
// float16/bfloat16 compute in float32.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/linalg_util.h"
#include "runtime/kernels/softmax_row.h"
#include "runtime/random.h"

namespace coil::ops {

namespace {

Shape batch_of(const Tensor& t) { return Shape(t.sizes().begin(), t.sizes().end() - 2); }

// The broadcast batch of q, k and v, or an error naming all three.
Shape attention_batch(const Tensor& q, const Tensor& k, const Tensor& v) {
  Shape out;
  for (const Tensor* t : {&q, &k, &v}) {
    Shape b = batch_of(*t);
    size_t n = std::max(out.size(), b.size());
    Shape next(n);
    for (size_t i = 0; i < n; ++i) {
      int64_t x = i < n - out.size() ? 1 : out[i - (n - out.size())];
      int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
      COIL_CHECK(x == y || x == 1 || y == 1,
                 "scaled_dot_product_attention: the batch dims of "
                 "query ",
                 describe(q), ", key ", describe(k), " and value ", describe(v),
                 " cannot be broadcast together; batch sizes must match or be 1");
      next[i] = x == 1 ? y : x;
    }
    out = next;
  }
  return out;
}

// The scores' shape (batch..., L, S); the output is (batch..., L, Ev).
struct AttentionShape {
  Shape batch;
  int64_t l, s, ev;
};

AttentionShape attention_shape(const Args& a) {
  const char* op = "scaled_dot_product_attention";
  const Tensor &q = a.tensor(0), &k = a.tensor(1), &v = a.tensor(2);
  Tensor mask = a.opt_tensor(3);
  double p = a.f64(4);
  COIL_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, op,
             ": query, key and value must be at least 2-D (..., seq, features), got ", describe(q),
             ", ", describe(k), " and ", describe(v));
  COIL_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(), op,
             ": query, key and value must have the same dtype, got ", describe(q), ", ",
             describe(k), " and ", describe(v));
  COIL_CHECK(is_floating(q.dtype()), op, ": query, key and value must be floating-point, got ",
             describe(q), "; convert with .to(float32)");
  COIL_CHECK(k.size(-1) == q.size(-1), op, ": query ", describe(q), " and key ", describe(k),
             " must have the same last (embedding) size");
  COIL_CHECK(v.size(-2) == k.size(-2), op, ": key ", describe(k), " and value ", describe(v),
             " must have the same sequence length (size -2)");
  AttentionShape s{attention_batch(q, k, v), q.size(-2), k.size(-2), v.size(-1)};
  if (mask.defined()) {
    COIL_CHECK(!a.b(5), op,
               ": an explicit attn_mask cannot be combined with is_causal=True; "
               "pass one or the other");
    COIL_CHECK(mask.dtype() == kBool || mask.dtype() == kFloat32 || mask.dtype() == q.dtype(), op,
               ": attn_mask must be bool, float32 or the query's dtype ", dtype_name(q.dtype()),
               ", got ", describe(mask));
    Shape scores = s.batch;
    scores.push_back(s.l);
    scores.push_back(s.s);
    COIL_CHECK(broadcasts_to(mask.sizes(), scores), op, ": attn_mask ", describe(mask),
               " cannot broadcast to the attention scores' shape ", shape_str(scores),
               " (batch..., query length, key length)");
  }
  COIL_CHECK(p >= 0.0 && p <= 1.0, op, ": dropout_p must be in [0, 1], got ", p);
  return s;
}

// The softmax of one row of scores, row r of the (batch..., L, S) scores: scale, mask and
// causality first, then a "safe" softmax and dropout's keep-mask `keep` (when given).
template <typename T>
class RowSoftmax {
 public:
  RowSoftmax(const AttentionShape& sh, double scale, const Tensor& mask, bool causal,
             const Tensor& keep, double keep_scale)
      : sh_(sh),
        scale_(static_cast<T>(scale)),
        causal_(causal),
        mask_p_(mask.defined() ? static_cast<const char*>(mask.data_ptr()) : nullptr),
        bool_mask_(mask.defined() && mask.dtype() == kBool),
        mstride_(mask.defined() ? broadcast_strides(mask, scores_sizes(sh)) : Shape{}),
        keep_p_(keep.defined() ? keep.data_ptr<T>() : nullptr),
        keep_scale_(static_cast<T>(keep_scale)) {}

  static Shape scores_sizes(const AttentionShape& sh) {
    Shape s = sh.batch;
    s.push_back(sh.l);
    s.push_back(sh.s);
    return s;
  }

  void operator()(T* x, int64_t r) const {
    const int64_t l = r % sh_.l, s = sh_.s, nb = static_cast<int64_t>(sh_.batch.size());
    if constexpr (std::is_same_v<T, float>) {
      if (!mask_p_ && !keep_p_) {  // the common case, vectorised: keys up to the causal limit
        const int64_t valid = causal_ ? std::min(l + 1, s) : s;
        softmax_row(x, valid, scale_);
        std::fill(x + valid, x + s, 0.0f);
        return;
      }
    }
    const T neg_inf = -std::numeric_limits<T>::infinity();
    // The mask's offset for this row: unravel the batch index against its broadcast strides.
    int64_t moff = 0, ms = 0;
    if (mask_p_) {
      moff = l * mstride_[nb];
      ms = mstride_[nb + 1];
      for (int64_t d = nb - 1, rem = r / sh_.l; d >= 0; --d) {
        moff += (rem % sh_.batch[d]) * mstride_[d];
        rem /= sh_.batch[d];
      }
    }
    bool all_masked = true;
    T mx = neg_inf;
    for (int64_t j = 0; j < s; ++j) {
      T v = x[j] * scale_;
      if (causal_ && j > l) v = neg_inf;
      if (bool_mask_ && !reinterpret_cast<const bool*>(mask_p_)[moff + j * ms]) v = neg_inf;
      if (mask_p_ && !bool_mask_) v += reinterpret_cast<const T*>(mask_p_)[moff + j * ms];
      x[j] = v;
      if (v != neg_inf) all_masked = false;
      if (v > mx) mx = v;
    }
    if (all_masked) {
      std::fill(x, x + s, T(0));
      return;
    }
    T sum = 0;
    for (int64_t j = 0; j < s; ++j) sum += (x[j] = std::exp(x[j] - mx));
    const T inv = T(1) / sum;
    for (int64_t j = 0; j < s; ++j) {
      x[j] *= inv;
      if (keep_p_) x[j] *= keep_p_[r * s + j] * keep_scale_;
    }
  }

 private:
  const AttentionShape& sh_;
  T scale_;
  bool causal_;
  const char* mask_p_;
  bool bool_mask_;
  Shape mstride_;
  const T* keep_p_;
  T keep_scale_;
};

}  // namespace

std::vector<TensorMeta> meta_scaled_dot_product_attention(const Args& a) {
  AttentionShape s = attention_shape(a);
  Shape sizes = s.batch;
  sizes.push_back(s.l);
  sizes.push_back(s.ev);
  return one(contiguous_meta(a.tensor(0).dtype(), sizes,
                             common_device(a, {0, 1, 2, 3}, "scaled_dot_product_attention")));
}

std::vector<Tensor> eager_scaled_dot_product_attention(const Args& a,
                                                       const std::vector<TensorMeta>& out) {
  AttentionShape sh = attention_shape(a);
  Tensor r = empty_from_meta(out[0]);
  if (r.numel() == 0) return one(r);
  DType ct = r.dtype() == kFloat64 ? kFloat64 : kFloat32;
  Tensor q = as_dtype(a.tensor(0), ct), k = as_dtype(a.tensor(1), ct),
         v = as_dtype(a.tensor(2), ct);
  Tensor mask = a.opt_tensor(3);
  if (mask.defined() && mask.dtype() != kBool) mask = as_dtype(mask, ct);
  double p = a.f64(4);
  double scale = a.opt_f64(6).value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));

  Tensor scores = empty_contiguous(RowSoftmax<float>::scores_sizes(sh), ct);
  batched_product(scores, sh.batch, mat_operand(q, true), transposed(mat_operand(k, true)), false);
  dispatch_floating(ct, [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      // Dropout on the attention weights, as torch.nn.functional.dropout in training mode: each
      // weight is kept with probability 1 - p and scaled by 1 / (1 - p); p = 1 drops everything.
      Tensor keep;
      if (p > 0) {
        keep = empty_contiguous(scores.sizes(), ct);
        fill_uniform(keep, 0.0, 1.0);
        T* u = keep.data_ptr<T>();
        for (int64_t i = 0; i < keep.numel(); ++i) u[i] = u[i] >= static_cast<T>(p) ? T(1) : T(0);
      }
      RowSoftmax<T> softmax(sh, scale, mask, a.b(5), keep, p < 1 ? 1.0 / (1.0 - p) : 0.0);
      T* rows = scores.data_ptr<T>();
      const int64_t n = numel_of(sh.batch) * sh.l;
      if (n > 1 && n * sh.s >= kParallelGrain) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; ++i) softmax(rows + i * sh.s, i);
      } else {
        for (int64_t i = 0; i < n; ++i) softmax(rows + i * sh.s, i);
      }
    }
  });
  Tensor acc = r.dtype() == ct ? r : empty_contiguous(r.sizes(), ct);
  batched_product(acc, sh.batch, mat_operand(scores, true), mat_operand(v, true), false);
  if (!acc.is_same(r)) copy_into(r, acc);
  return one(r);
}

}  // namespace coil::ops
