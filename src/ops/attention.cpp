// scaled_dot_product_attention, as PyTorch's math path: scores = q @ k^T * scale (+ mask),
// a "safe" softmax over the keys (a row with every key masked out gives zeros, not NaN),
// dropout, then @ v. Both products go through batched_product (the matmul library, operands
// read in place); float32 rows without a mask or dropout take the vectorised softmax_row, or,
// where the CPU has AVX-512, a flash-style blocked form (attention_by_row_blocks), which also
// takes float16/bfloat16 as they are. Elsewhere float16/bfloat16 compute in float32 copies.
#include <algorithm>
#include <cmath>
#include <limits>

#include <omp.h>

#include "heuristics/heuristics.h"
#include "ops/linalg_util.h"
#include "runtime/cuda_runtime.h"
#include "runtime/kernels/attention_backward_block.h"
#include "runtime/kernels/attention_block.h"
#include "runtime/kernels/blas.h"
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

// Applies scale, mask and causality to each row of `scores` (contiguous, shape
// (batch..., L, S)), then the safe softmax and dropout's keep-mask `keep` (when given).
template <typename T>
void softmax_rows(Tensor& scores, const AttentionShape& sh, double scale, const Tensor& mask,
                  bool causal, const Tensor& keep, double keep_scale) {
  T* base = scores.data_ptr<T>();
  const T* keep_p = keep.defined() ? keep.data_ptr<T>() : nullptr;
  Shape mstride = mask.defined() ? broadcast_strides(mask, scores.sizes()) : Shape{};
  bool bool_mask = mask.defined() && mask.dtype() == kBool;
  const char* mask_p = mask.defined() ? static_cast<const char*>(mask.data_ptr()) : nullptr;
  int64_t rows = numel_of(sh.batch) * sh.l, nb = static_cast<int64_t>(sh.batch.size());
  const T neg_inf = -std::numeric_limits<T>::infinity();

  auto row = [&](int64_t r) {
    T* x = base + r * sh.s;
    int64_t l = r % sh.l;
    if constexpr (std::is_same_v<T, float>) {
      if (!mask_p && !keep_p) {  // the common case, vectorised: keys past the causal limit 0
        const int64_t valid = causal ? std::min(l + 1, sh.s) : sh.s;
        softmax_row(x, valid, static_cast<float>(scale));
        std::fill(x + valid, x + sh.s, 0.0f);
        return;
      }
    }
    // The mask's offset for this row: unravel the batch index against its broadcast strides.
    int64_t moff = 0, ms = 0;
    if (mask_p) {
      moff = l * mstride[nb];
      ms = mstride[nb + 1];
      for (int64_t d = nb - 1, rem = r / sh.l; d >= 0; --d) {
        moff += (rem % sh.batch[d]) * mstride[d];
        rem /= sh.batch[d];
      }
    }
    bool all_masked = true;
    T mx = neg_inf;
    for (int64_t j = 0; j < sh.s; ++j) {
      T v = x[j] * static_cast<T>(scale);
      if (causal && j > l) v = neg_inf;
      if (bool_mask && !reinterpret_cast<const bool*>(mask_p)[moff + j * ms]) v = neg_inf;
      if (mask_p && !bool_mask) v += reinterpret_cast<const T*>(mask_p)[moff + j * ms];
      x[j] = v;
      if (v != neg_inf) all_masked = false;
      if (v > mx) mx = v;
    }
    if (all_masked) {
      std::fill(x, x + sh.s, T(0));
      return;
    }
    T sum = 0;
    for (int64_t j = 0; j < sh.s; ++j) sum += (x[j] = std::exp(x[j] - mx));
    for (int64_t j = 0; j < sh.s; ++j) {
      x[j] /= sum;
      if (keep_p) x[j] *= keep_p[r * sh.s + j] * static_cast<T>(keep_scale);
    }
  };
  if (rows > 1 && rows * sh.s >= kParallelGrain) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) row(r);
  } else {
    for (int64_t r = 0; r < rows; ++r) row(r);
  }
}

// Flash-style attention without a mask or dropout, where the CPU has AVX-512: each
// task is a block of query rows of one batch entry, whose scores, softmax and output rows one
// thread computes in one kernel (attention_block) while the scores stay in its cache, all tasks
// in one parallel region. The batched path runs three regions (two products and the softmax)
// and writes the scores out in between. float32, bfloat16 or float16 operands (all three of
// one type, `out` of it too) are read in place, 16-bit ones widened in the kernel. Returns
// false, computing nothing, where it does not apply: no AVX-512, or values whose rows are not
// contiguous.
template <typename T>
bool attention_by_row_blocks(const Tensor& q, const Tensor& k, const Tensor& v,
                             const AttentionShape& sh, double scale, bool causal,
                             const Tensor& out) {
  const int64_t count = numel_of(sh.batch), e = q.size(-1), threads = omp_get_max_threads();
  MatOperand mq = mat_operand(q, true), mk = mat_operand(k, true), mv = mat_operand(v, true);
  auto row = [](const MatOperand& m) { return m.strides[m.strides.size() - 2]; };
  const int64_t q_row = row(mq), q_col = mq.strides.back(), k_row = row(mk),
                k_col = mk.strides.back(), v_row = row(mv);
  // (Without features, every score is 0 * scale, which the batched path computes as written.)
  if (!attention_block_available() || sh.s == 0 || e == 0 || (mv.strides.back() != 1 && sh.ev > 1))
    return false;
  // The largest block that gives every thread a task and keeps its scores within 256 KB.
  int64_t rows = 128;
  auto blocks_of = [&](int64_t n) { return (sh.l + n - 1) / n; };
  while (rows > 16 && (rows * sh.s > (int64_t{1} << 16) || count * blocks_of(rows) < threads))
    rows /= 2;
  rows = std::min(rows, sh.l);
  const int64_t blocks = blocks_of(rows);
  const std::vector<int64_t> qo = batch_offsets(mq, sh.batch), ko = batch_offsets(mk, sh.batch),
                             vo = batch_offsets(mv, sh.batch);
  const auto* pq = static_cast<const T*>(mq.data);
  const auto* pk = static_cast<const T*>(mk.data);
  const auto* pv = static_cast<const T*>(mv.data);
  T* po = out.data_ptr<T>();
  bool ok = true;
#pragma omp parallel for schedule(static) reduction(&& : ok)
  for (int64_t t = 0; t < count * blocks; ++t) {
    const int64_t b = t / blocks, r0 = (t % blocks) * rows;
    const AttentionBlock<T> blk{.q = pq + qo[b] + r0 * q_row,
                                .q_row = q_row,
                                .q_col = q_col,
                                .k = pk + ko[b],
                                .k_row = k_row,
                                .k_col = k_col,
                                .v = pv + vo[b],
                                .v_row = v_row,
                                .out = po + (b * sh.l + r0) * sh.ev,
                                .out_row = sh.ev,
                                .n = std::min(rows, sh.l - r0),
                                .s = sh.s,
                                .e = e,
                                .ev = sh.ev,
                                .first_row = r0,
                                .scale = static_cast<float>(scale),
                                .causal = causal};
    ok = attention_block(blk) && ok;
  }
  COIL_CHECK(ok,
             "scaled_dot_product_attention: out of memory for a thread's scratch (the scores "
             "of ",
             rows, " query rows against ", sh.s, " keys; query ", describe(q), ", key ",
             describe(k), "); pass fewer keys or free memory");
  return true;
}

// The backward of self-attention (every operand of one shape, features contiguous) a batch entry
// a task, each on one thread (attention_backward_block.h), into `acc` ([3, batch..., n, e],
// features contiguous).
void backward_by_entries(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v,
                         const Tensor& o, const AttentionShape& sh, double scale, bool causal,
                         const Tensor& acc) {
  const std::vector<MatOperand> m = {mat_operand(q, true), mat_operand(k, true),
                                     mat_operand(v, true), mat_operand(g, true),
                                     mat_operand(o, true)};
  const int64_t n = sh.l, e = sh.ev, count = numel_of(sh.batch);
  std::vector<std::vector<int64_t>> offsets;
  for (const MatOperand& x : m) offsets.push_back(batch_offsets(x, sh.batch));
  // The gradients' matrices in acc's layout (contiguous, or token-major: the op's meta).
  const MatOperand grads = mat_operand(acc.select(0, 0), true);
  const std::vector<int64_t> grad_at = batch_offsets(grads, sh.batch);
  const int64_t part = acc.stride(0);
  auto row = [](const MatOperand& x) { return x.strides[x.strides.size() - 2]; };
  blas();  // loaded here: its coil::Error must not be thrown inside the parallel region
  bool ok = true;
  dispatch_floating(acc.dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      auto at = [&](size_t i, int64_t b) {
        return static_cast<const T*>(m[i].data) + offsets[i][static_cast<size_t>(b)];
      };
      T* out = acc.data_ptr<T>();
#pragma omp parallel for schedule(dynamic) reduction(&& : ok) if (count > 1)
      for (int64_t b = 0; b < count; ++b) {
        const AttentionBackwardEntry<T> entry{
            .q = at(0, b),
            .k = at(1, b),
            .v = at(2, b),
            .g = at(3, b),
            .o = at(4, b),
            .q_row = row(m[0]),
            .k_row = row(m[1]),
            .v_row = row(m[2]),
            .g_row = row(m[3]),
            .o_row = row(m[4]),
            .dq = out + grad_at[static_cast<size_t>(b)],
            .dk = out + grad_at[static_cast<size_t>(b)] + part,
            .dv = out + grad_at[static_cast<size_t>(b)] + 2 * part,
            .d_row = row(grads),
            .n = n,
            .e = e,
            .scale = static_cast<T>(scale),
            .causal = causal};
        ok = attention_backward_entry(entry) && ok;
      }
    }
  });
  COIL_CHECK(ok, "scaled_dot_product_attention_backward: out of memory for a thread's scratch (",
             std::min<int64_t>(64, n), " x ", n, " weights and their gradient; query ", describe(q),
             "); free memory");
}

}  // namespace

// The result is contiguous, but where the GPU's fused kernel runs (no mask, no dropout, heads
// it takes): there a 4-D result [batch, heads, tokens, features] is stored token-major, as
// PyTorch's memory-efficient kernel stores it, which the output projection then reads as it is
// ([batch, tokens, heads * features]). (Never from the operands' strides: lowering may realize
// them otherwise than the captured graph had them.)
std::vector<TensorMeta> meta_scaled_dot_product_attention(const Args& a) {
  AttentionShape s = attention_shape(a);
  Shape sizes = s.batch;
  sizes.push_back(s.l);
  sizes.push_back(s.ev);
  const Tensor& q = a.tensor(0);
  TensorMeta m = contiguous_meta(q.dtype(), sizes,
                                 common_device(a, {0, 1, 2, 3}, "scaled_dot_product_attention"));
  const int64_t head = q.size(-1), value_head = a.tensor(2).size(-1);
  if (m.device.is_cuda() && a.is_none(3) && a.f64(4) == 0 && head > 0 &&
      head <= cuda::kFusedAttentionMaxHead && value_head <= cuda::kFusedAttentionMaxHead &&
      sizes.size() == 4)
    m = dense_in_order_of(std::move(m), {4, 2, 3, 1});  // batch, tokens, heads, features
  return one(std::move(m));
}

std::vector<Tensor> eager_scaled_dot_product_attention(const Args& a,
                                                       const std::vector<TensorMeta>& out) {
  AttentionShape sh = attention_shape(a);
  Tensor r = empty_from_meta(out[0]);
  if (r.numel() == 0) return one(r);
  const bool plain = !a.opt_tensor(3).defined() && a.f64(4) == 0;
  const double scale =
      a.opt_f64(6).value_or(1.0 / std::sqrt(static_cast<double>(a.tensor(0).size(-1))));
  if (plain && is_reduced_float(r.dtype())) {
    const Tensor &q = a.tensor(0), &k = a.tensor(1), &v = a.tensor(2);
    const bool done = r.dtype() == kBFloat16
                          ? attention_by_row_blocks<BFloat16>(q, k, v, sh, scale, a.b(5), r)
                          : attention_by_row_blocks<Half>(q, k, v, sh, scale, a.b(5), r);
    if (done) return one(r);
  }
  DType ct = r.dtype() == kFloat64 ? kFloat64 : kFloat32;
  Tensor q = as_dtype(a.tensor(0), ct), k = as_dtype(a.tensor(1), ct),
         v = as_dtype(a.tensor(2), ct);
  Tensor mask = a.opt_tensor(3);
  if (mask.defined() && mask.dtype() != kBool) mask = as_dtype(mask, ct);
  double p = a.f64(4);

  Tensor acc = r.dtype() == ct ? r : empty_contiguous(r.sizes(), ct);
  if (ct == kFloat32 && plain && attention_by_row_blocks<float>(q, k, v, sh, scale, a.b(5), acc)) {
    if (!acc.is_same(r)) copy_into(r, acc);
    return one(r);
  }
  Shape score_sizes = sh.batch;
  score_sizes.push_back(sh.l);
  score_sizes.push_back(sh.s);
  Tensor scores = empty_contiguous(score_sizes, ct);
  batched_product(scores, sh.batch, mat_operand(q, true), transposed(mat_operand(k, true)), false);

  // Dropout on the attention weights, as torch.nn.functional.dropout in training mode: each
  // weight is kept with probability 1 - p and scaled by 1 / (1 - p); p = 1 drops everything.
  Tensor keep;
  if (p > 0) {
    keep = empty_contiguous(score_sizes, ct);
    fill_uniform(keep, 0.0, 1.0);
    dispatch_floating(ct, [&]<typename T>() {
      T* u = keep.data_ptr<T>();
      for (int64_t i = 0; i < keep.numel(); ++i) u[i] = u[i] >= static_cast<T>(p) ? T(1) : T(0);
    });
  }
  double keep_scale = p < 1 ? 1.0 / (1.0 - p) : 0.0;
  dispatch_floating(ct, [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
      softmax_rows<T>(scores, sh, scale, mask, a.b(5), keep, keep_scale);
  });

  batched_product(acc, sh.batch, mat_operand(scores, true), mat_operand(v, true), false);
  if (!acc.is_same(r)) copy_into(r, acc);
  return one(r);
}

}  // namespace coil::ops

namespace coil::ops {

namespace {

// scaled_dot_product_attention_stats's arguments as scaled_dot_product_attention's (no mask, no
// dropout), kept alive beside the Args that reads them.
struct AsAttention {
  std::vector<Arg> v;
  Args args;
  explicit AsAttention(const Args& a) : v{a[0], a[1], a[2], Arg(), 0.0, a[3], a[4]}, args(v) {}
};

// Each row's log-sum-exp of its scaled scores (keys j <= i for row i when causal), in float64.
void row_log_sum_exp(const Tensor& q_in, const Tensor& k_in, double scale, bool causal,
                     const Tensor& stats) {
  const Tensor q = as_contiguous(as_dtype(q_in, kFloat64)),
               k = as_contiguous(as_dtype(k_in, kFloat64));
  const int64_t L = q.size(-2), S = k.size(-2), E = q.size(-1), batches = stats.numel() / L;
  const double *qd = q.data_ptr<double>(), *kd = k.data_ptr<double>();
  std::vector<double> row(static_cast<size_t>(S));
  Tensor out = empty_contiguous(stats.sizes(), kFloat64);
  double* o = out.data_ptr<double>();
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t i = 0; i < L; ++i) {
      const int64_t keys = causal ? std::min(i + 1, S) : S;
      double m = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t j = 0; j < keys; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < E; ++e) dot += qd[(b * L + i) * E + e] * kd[(b * S + j) * E + e];
        row[j] = dot * scale;
        m = std::max(m, row[j]);
      }
      for (int64_t j = 0; j < keys; ++j) sum += std::exp(row[j] - m);
      o[b * L + i] = keys ? m + std::log(sum) : -std::numeric_limits<double>::infinity();
    }
  copy_into(stats, out);
}

}  // namespace

// scaled_dot_product_attention_stats(query, key, value, is_causal, scale): [out, stats], out as
// scaled_dot_product_attention's (its layout too), stats [batch..., L] in float32 (float64 for
// float64 inputs). On the CPU (a
// GPU's fallback where its library declines) out is the attention's eager kernel and stats a
// float64 loop.
std::vector<TensorMeta> meta_scaled_dot_product_attention_stats(const Args& a) {
  const char* op = "scaled_dot_product_attention_stats";
  const Tensor &q = a.tensor(0), &k = a.tensor(1), &v = a.tensor(2);
  COIL_CHECK(k.sizes() == q.sizes() && v.sizes() == q.sizes(), op, ": key ", describe(k),
             " and value ", describe(v), " must have the query's sizes ", describe(q),
             " (self-attention; other attention takes scaled_dot_product_attention)");
  const AsAttention as(a);
  TensorMeta out = meta_scaled_dot_product_attention(as.args).at(0);
  TensorMeta stats = contiguous_meta(q.dtype() == kFloat64 ? kFloat64 : kFloat32,
                                     Shape(q.sizes().begin(), q.sizes().end() - 1), out.device);
  return {std::move(out), std::move(stats)};
}

std::vector<Tensor> eager_scaled_dot_product_attention_stats(const Args& a,
                                                             const std::vector<TensorMeta>& out) {
  const AsAttention as(a);
  Tensor o = eager_scaled_dot_product_attention(as.args, {out.at(0)}).at(0);
  Tensor stats = empty_from_meta(out.at(1));
  const Tensor& q = a.tensor(0);
  const double scale = a.opt_f64(4).value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  if (stats.numel() > 0) row_log_sum_exp(q, a.tensor(1), scale, a.b(3), stats);
  return {o, stats};
}

// scaled_dot_product_attention_backward(grad_out, query, key, value, out, is_causal, scale):
// self-attention's gradients, [dq, dk, dv] stacked. On the CPU as the math path's backward
// (attention's derivative rule without this op): the weights p made again, dv = p^T g,
// ds = p (dp - D) with dp = g v^T, dq = ds k s, dk = ds^T q s; D = rowsum(g out), which is
// rowsum(dp p) when `out` is the attention's output.
std::vector<TensorMeta> meta_scaled_dot_product_attention_backward(const Args& a) {
  const char* op = "scaled_dot_product_attention_backward";
  const Tensor& q = a.tensor(1);
  const char* names[] = {"grad_out", "query", "key", "value", "out"};
  for (size_t i = 0; i < 5; ++i)
    COIL_CHECK(a.tensor(i).sizes() == q.sizes() && a.tensor(i).dtype() == q.dtype(), op, ": ",
               names[i], " ", describe(a.tensor(i)), " must have the query's sizes and dtype ",
               describe(q),
               " (self-attention; other attention takes the decomposed backward of "
               "scaled_dot_product_attention)");
  COIL_CHECK(q.dim() >= 2 && is_floating(q.dtype()), op,
             ": the query must be floating-point and at least 2-D (..., seq, features), got ",
             describe(q));
  Shape sizes = {3};
  sizes.insert(sizes.end(), q.sizes().begin(), q.sizes().end());
  TensorMeta m = contiguous_meta(q.dtype(), sizes, common_device(a, {0, 1, 2, 3, 4}, op));
  if (!heuristics::for_device(m.device).fused_attention_backward(q.dtype(), q.size(-1)) ||
      (m.device.is_cuda() && q.size(-1) < 1))
    return one(std::move(m));
  // The kernels (the GPU's, the CPU's entries) write 4-D gradients [3, batch, heads, tokens,
  // features] stored as one [batch, tokens, 3, heads, features] projection (PyTorch's
  // memory-efficient backward does so for q, k and v split from one): the projection's
  // gradient, the concatenation of the three, is then this buffer as it is (lower_cat), and
  // each alone is a matrix of tokens with a row stride for its own projection's products.
  if (q.dim() == 4) m = dense_in_order_of(std::move(m), {3, 5, 2, 4, 1});
  return one(std::move(m));
}

std::vector<Tensor> eager_scaled_dot_product_attention_backward(
    const Args& a, const std::vector<TensorMeta>& out) {
  Tensor r = empty_from_meta(out[0]);
  if (r.numel() == 0) return one(r);
  const DType ct = r.dtype() == kFloat64 ? kFloat64 : kFloat32;
  // Features contiguous, as the entries' products read them (a strided view is copied).
  auto operand = [&](size_t i) {
    Tensor t = as_dtype(a.tensor(i), ct);
    return t.size(-1) == 1 || t.stride(-1) == 1 ? t : as_contiguous(t);
  };
  const Tensor g = operand(0), q = operand(1), k = operand(2), v = operand(3), o = operand(4);
  const AttentionShape sh{batch_of(q), q.size(-2), k.size(-2), v.size(-1)};
  const double scale = a.opt_f64(6).value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  TensorMeta in_ct = out[0];
  in_ct.dtype = ct;
  Tensor acc = r.dtype() == ct ? r : empty_from_meta(in_ct);
  backward_by_entries(g, q, k, v, o, sh, scale, a.b(5), acc);
  if (!acc.is_same(r)) copy_into(r, acc);
  return one(r);
}

}  // namespace coil::ops
