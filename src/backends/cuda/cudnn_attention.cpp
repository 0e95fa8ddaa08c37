#include "backends/cuda/cudnn_attention.h"

#include "backends/cuda/cudnn_calls.h"

#if __has_include(<cudnn.h>)
#include <atomic>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>

#include <coil/error.h>

#include "backends/cuda/cudnn_graph.h"
#include "backends/cuda/cudnn_library.h"
#include "backends/cuda/flash_attention.h"
#include "runtime/copy.h"
#include "runtime/cuda_runtime.h"
#include "runtime/tensor_impl.h"

namespace coil::cuda {

namespace {

using Dims = std::vector<int64_t>;

// An operand as cuDNN's attention reads it: [batch, heads, rows, features] with a stride each
// (features unit), its memory 16-byte aligned.
struct Operand {
  Tensor t;
  Dims dims, strides;
  Dims transposed_dims() const { return {dims[0], dims[1], dims[3], dims[2]}; }
  Dims transposed_strides() const { return {strides[0], strides[1], strides[3], strides[2]}; }
};

bool aligned(const Operand& op) {
  for (size_t i = 0; i < 3; ++i)
    if (op.dims[i] > 1 && (op.strides[i] == 0 || op.strides[i] % 8 != 0)) return false;
  return reinterpret_cast<uintptr_t>(op.t.impl()->data()) % 16 == 0;
}

// The batch dims folded in two (attention_operand), or a contiguous copy where they do not fold,
// broadcast, or leave the rows unaligned. A `result` is written in place, so never copied.
std::optional<Operand> operand(const Tensor& x, const Shape& batch, bool result) {
  const AttentionOperand a = attention_operand(x, batch, result);
  const int64_t inner = batch.empty() ? 1 : batch.back();
  const int64_t total = numel_of(batch);
  // (A dim of size 1 is given the stride it would have contiguous: cuDNN takes no 0 there.)
  auto make = [&](const Tensor& t, int64_t outer_stride, int64_t inner_stride, int64_t row) {
    Operand op{
        t, {total / inner, inner, t.size(-2), t.size(-1)}, {outer_stride, inner_stride, row, 1}};
    for (size_t i = 3; i-- > 0;)
      if (op.dims[i] == 1) op.strides[i] = op.strides[i + 1] * op.dims[i + 1];
    return op;
  };
  Operand op = make(a.t, a.outer, a.inner, a.row);
  if (aligned(op)) return op;
  if (result) return std::nullopt;
  const Tensor c = contiguous_copy(a.t);
  const int64_t rows = c.size(-2) * c.size(-1);
  op = make(c, inner * rows, rows, c.size(-1));
  return aligned(op) ? std::optional<Operand>(op) : std::nullopt;
}

Dims rows_of(const Dims& d) { return {d[0], d[1], d[2], 1}; }
// A float32 value per row [batch, heads, rows, 1], contiguous, in memory.
TensorId row_values(DnnGraph& g, const Dims& rows) {
  return g.tensor(rows, {rows[1] * rows[2], rows[2], 1, 1}, CUDNN_DATA_FLOAT);
}
Dims scores_of(const Operand& q, const Operand& k) {
  return {q.dims[0], q.dims[1], q.dims[2], k.dims[2]};
}

// x with every score above the diagonal (key after query) -inf.
TensorId causal_mask(DnnGraph& g, TensorId x, const Dims& scores) {
  const TensorId row = g.inner(scores, CUDNN_DATA_INT32), col = g.inner(scores, CUDNN_DATA_INT32);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, x, kNoTensor, row, CUDNN_DATA_FLOAT, kNoTensor, 2);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, x, kNoTensor, col, CUDNN_DATA_FLOAT, kNoTensor, 3);
  const TensorId keep = g.inner(scores, CUDNN_DATA_BOOLEAN);
  g.pointwise(CUDNN_POINTWISE_CMP_GE, row, col, keep, CUDNN_DATA_BOOLEAN);
  const TensorId y = g.inner(scores, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, x, g.scalar(-std::numeric_limits<float>::infinity()),
              y, CUDNN_DATA_FLOAT, keep);
  return y;
}

// s = q k^T * scale, masked where causal: the scores both graphs start from.
TensorId scores(DnnGraph& g, TensorId q, TensorId kt, const Dims& dims, double scale, bool causal) {
  const TensorId s = g.inner(dims, CUDNN_DATA_FLOAT), scaled = g.inner(dims, CUDNN_DATA_FLOAT);
  g.matmul(q, kt, s);
  g.pointwise(CUDNN_POINTWISE_MUL, s, g.scalar(static_cast<float>(scale)), scaled);
  return causal ? causal_mask(g, scaled, dims) : scaled;
}

TensorId unary(DnnGraph& g, cudnnPointwiseMode_t mode, TensorId x, const Dims& dims) {
  const TensorId y = g.inner(dims, CUDNN_DATA_FLOAT);
  g.pointwise(mode, x, kNoTensor, y);
  return y;
}

TensorId binary(DnnGraph& g, cudnnPointwiseMode_t mode, TensorId x, TensorId b, const Dims& dims,
                cudnnDataType_t type = CUDNN_DATA_FLOAT) {
  const TensorId y = g.inner(dims, type);
  g.pointwise(mode, x, b, y);
  return y;
}

// A built graph, its tensors' ids in the order the run passes their memory, and the float32
// scratch its fixed-size intermediates take (cuDNN's backward keeps rowsum(dO * O) and dq's
// float32 accumulator in memory it is given).
struct Built {
  DnnGraph graph;
  bool ok = false;
  std::string what, why;
  mutable std::atomic<int64_t> runs{0};
  std::vector<TensorId> ids;
  std::vector<int64_t> scratch_floats;  // one per id past the operands
};

struct Cache {
  std::mutex mutex;
  std::map<std::vector<int64_t>, std::unique_ptr<Built>> graphs;
};

Cache& cache() {
  static auto* c = new Cache;
  return *c;
}

// The graph of `key`, made (by `make`) and built on first use; `what` names it.
template <typename Make>
const Built& built(const std::vector<int64_t>& key, int device, std::string what, Make make) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  std::unique_ptr<Built>& b = c.graphs[key];
  if (!b) {
    b = std::make_unique<Built>();
    b->what = std::move(what);
    make(*b);
    b->ok = b->graph.build(handle(device), &b->why);
  }
  return *b;
}

void append(std::vector<int64_t>& key, const Operand& op) {
  key.insert(key.end(), op.dims.begin(), op.dims.end());
  key.insert(key.end(), op.strides.begin(), op.strides.end());
}

// Runs `b` with the operands' memory, then scratch for its intermediates and its workspace.
void run(const Built& b, int device, const std::vector<const Tensor*>& operands) {
  std::vector<std::pair<TensorId, void*>> pointers;
  for (size_t i = 0; i < operands.size(); ++i)
    pointers.emplace_back(b.ids[i], operands[i]->impl()->data());
  std::vector<void*> scratch;
  for (size_t i = 0; i < b.scratch_floats.size(); ++i) {
    scratch.push_back(allocate(static_cast<size_t>(b.scratch_floats[i]) * 4, device));
    pointers.emplace_back(b.ids[operands.size() + i], scratch.back());
  }
  const int64_t ws = b.graph.workspace_bytes();
  if (ws > 0) scratch.push_back(allocate(static_cast<size_t>(ws), device));
  struct Release {
    std::vector<void*>& p;
    int device;
    ~Release() {
      for (void* q : p) free(q, device);  // stream-ordered: reused only by later work
    }
  } release{scratch, device};
  set_device(device);
  b.graph.run(handle(device), pointers, ws > 0 ? scratch.back() : nullptr);
  ++b.runs;
  note_launch(device, "cudnn_attention");
}

int64_t scale_bits(double scale) { return std::bit_cast<int64_t>(scale); }

std::string describe(const char* pass, DType dt, const Operand& q, bool causal) {
  return std::string(pass) + " " + dtype_name(dt) + " " + shape_str(q.dims) +
         (causal ? " causal" : "");
}

}  // namespace

bool cudnn_attention_takes(DType dtype, int64_t head, int64_t value_head) {
  return (dtype == kBFloat16 || dtype == kFloat16) && head % 8 == 0 && value_head % 8 == 0 &&
         head > 0 && value_head > 0 && head <= kFusedAttentionMaxHead &&
         value_head <= kFusedAttentionMaxHead && cudnn_available();
}

bool cudnn_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& out,
                     const Tensor& stats, double scale, bool causal) {
  const DType dt = out.dtype();
  if (out.numel() == 0 || k_in.size(-2) == 0) return false;
  if (!cudnn_attention_takes(dt, q_in.size(-1), v_in.size(-1)) || q_in.dtype() != dt ||
      k_in.dtype() != dt || v_in.dtype() != dt)
    return false;
  const Shape batch(out.sizes().begin(), out.sizes().end() - 2);
  const auto q = operand(q_in, batch, false), k = operand(k_in, batch, false),
             v = operand(v_in, batch, false), o = operand(out, batch, true);
  if (!q || !k || !v || !o) return false;
  const bool with_stats = stats.defined();
  const int device = out.device().index;
  std::vector<int64_t> key = {0,      device,     static_cast<int64_t>(dt),
                              causal, with_stats, scale_bits(scale)};
  for (const Operand* op : {&*q, &*k, &*v, &*o}) append(key, *op);
  const char* pass = with_stats ? "forward keeping the log-sum-exp" : "forward";
  const Built& b = built(key, device, describe(pass, dt, *q, causal), [&](Built& b) {
    DnnGraph& g = b.graph;
    const cudnnDataType_t type = data_type(dt);
    const TensorId qt = g.tensor(q->dims, q->strides, type);
    const TensorId kt = g.tensor(k->transposed_dims(), k->transposed_strides(), type);
    const TensorId vt = g.tensor(v->dims, v->strides, type);
    const TensorId ot = g.tensor(o->dims, o->strides, type);
    const Dims sd = scores_of(*q, *k), rd = rows_of(q->dims);
    const TensorId s = scores(g, qt, kt, sd, scale, causal);
    const TensorId max = g.inner(rd, CUDNN_DATA_FLOAT), sum = g.inner(rd, CUDNN_DATA_FLOAT);
    g.reduction(CUDNN_REDUCE_TENSOR_MAX, s, max);
    const TensorId e =
        unary(g, CUDNN_POINTWISE_EXP, binary(g, CUDNN_POINTWISE_SUB, s, max, sd), sd);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, sum);
    // The log-sum-exp is made whether or not it is kept: cuDNN's fused engine matches the
    // softmax with it.
    const TensorId st = with_stats ? row_values(g, rd) : g.inner(rd, CUDNN_DATA_FLOAT);
    g.pointwise(CUDNN_POINTWISE_ADD, max, unary(g, CUDNN_POINTWISE_LOG, sum, rd), st);
    b.ids = {qt, kt, vt, ot};
    if (with_stats) b.ids.push_back(st);
    const TensorId p = binary(g, CUDNN_POINTWISE_DIV, e, sum, sd, type);
    g.matmul(p, vt, ot);
  });
  if (!b.ok) return false;
  std::vector<const Tensor*> operands = {&q->t, &k->t, &v->t, &o->t};
  if (with_stats) operands.push_back(&stats);
  run(b, device, operands);
  return true;
}

bool cudnn_attention_backward(const Tensor& g_in, const Tensor& q_in, const Tensor& k_in,
                              const Tensor& v_in, const Tensor& o_in, const Tensor& stats,
                              const Tensor& grads, double scale, bool causal) {
  const DType dt = q_in.dtype();
  if (grads.numel() == 0 || !cudnn_attention_takes(dt, q_in.size(-1), v_in.size(-1))) return false;
  const Shape batch(q_in.sizes().begin(), q_in.sizes().end() - 2);
  const Tensor dq_in = grads.select(0, 0), dk_in = grads.select(0, 1), dv_in = grads.select(0, 2);
  const auto q = operand(q_in, batch, false), k = operand(k_in, batch, false),
             v = operand(v_in, batch, false), o = operand(o_in, batch, false),
             dout = operand(g_in, batch, false), dq = operand(dq_in, batch, true),
             dk = operand(dk_in, batch, true), dv = operand(dv_in, batch, true);
  if (!q || !k || !v || !o || !dout || !dq || !dk || !dv) return false;
  const int device = q_in.device().index;
  std::vector<int64_t> key = {1, device, static_cast<int64_t>(dt), causal, scale_bits(scale)};
  for (const Operand* op : {&*q, &*k, &*v, &*o, &*dout, &*dq, &*dk, &*dv}) append(key, *op);
  const Built& b = built(key, device, describe("backward", dt, *q, causal), [&](Built& b) {
    DnnGraph& g = b.graph;
    const cudnnDataType_t type = data_type(dt);
    const TensorId qt = g.tensor(q->dims, q->strides, type);
    const TensorId kt = g.tensor(k->transposed_dims(), k->transposed_strides(), type);
    const TensorId vt = g.tensor(v->transposed_dims(), v->transposed_strides(), type);
    const TensorId ot = g.tensor(o->dims, o->strides, type);
    const TensorId dot = g.tensor(dout->dims, dout->strides, type);
    const Dims sd = scores_of(*q, *k), rd = rows_of(q->dims);
    const TensorId st = row_values(g, rd);
    const TensorId dqt = g.tensor(dq->dims, dq->strides, type);
    const TensorId dkt = g.tensor(dk->dims, dk->strides, type);
    const TensorId dvt = g.tensor(dv->dims, dv->strides, type);
    // D = rowsum(dO * O), softmax's backward term, kept in memory.
    const TensorId d_sum = g.inner(rd, CUDNN_DATA_FLOAT);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, binary(g, CUDNN_POINTWISE_MUL, dot, ot, o->dims), d_sum);
    const TensorId d = row_values(g, rd);
    g.pointwise(CUDNN_POINTWISE_MUL, d_sum, g.scalar(1.0f), d);
    // p = exp(s - lse), made again; dv = p^T dO.
    const TensorId s = binary(g, CUDNN_POINTWISE_SUB, scores(g, qt, kt, sd, scale, false), st, sd);
    const TensorId p = unary(g, CUDNN_POINTWISE_EXP, causal ? causal_mask(g, s, sd) : s, sd);
    const Dims td = {sd[0], sd[1], sd[3], sd[2]},
               ts = {sd[1] * sd[2] * sd[3], sd[2] * sd[3], 1, sd[3]};
    const TensorId pt = g.inner(td, type, ts);
    g.reshape(p, pt);
    g.matmul(pt, dot, dvt);
    // ds = p * (dO v^T - D) * scale; dk = ds^T q; dq = ds k (accumulated in float32).
    const TensorId dp = g.inner(sd, CUDNN_DATA_FLOAT);
    g.matmul(dot, vt, dp);
    const TensorId ds =
        binary(g, CUDNN_POINTWISE_MUL,
               binary(g, CUDNN_POINTWISE_MUL, binary(g, CUDNN_POINTWISE_SUB, dp, d, sd), p, sd),
               g.scalar(static_cast<float>(scale)), sd);
    const TensorId dst = g.inner(td, type, ts);
    g.reshape(ds, dst);
    g.matmul(dst, qt, dkt);
    const TensorId kn = g.inner(k->dims, type, k->strides);
    g.reshape(kt, kn);
    const TensorId dq_acc = g.tensor(
        dq->dims,
        {dq->dims[1] * dq->dims[2] * dq->dims[3], dq->dims[2] * dq->dims[3], dq->dims[3], 1},
        CUDNN_DATA_FLOAT);
    g.matmul(ds, kn, dq_acc);
    g.pointwise(CUDNN_POINTWISE_IDENTITY, dq_acc, kNoTensor, dqt);
    b.ids = {qt, kt, vt, ot, dot, st, dqt, dkt, dvt, d, dq_acc};
    b.scratch_floats = {rd[0] * rd[1] * rd[2], numel_of(dq->dims)};
  });
  if (!b.ok) return false;
  run(b, device, {&q->t, &k->t, &v->t, &o->t, &dout->t, &stats, &dq->t, &dk->t, &dv->t});
  return true;
}

std::vector<std::string> cudnn_attention_graphs() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  std::vector<std::string> lines;
  for (const auto& [key, b] : c.graphs)
    lines.push_back(
        b->what + ": " +
        (b->ok ? "cuDNN's plan, " + std::to_string(b->runs) + " runs" : "declined, " + b->why));
  return lines;
}

}  // namespace coil::cuda

#else  // a toolkit without cuDNN: the callers take coil's own kernels

namespace coil::cuda {

bool cudnn_attention_takes(DType, int64_t, int64_t) { return false; }
bool cudnn_attention(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                     double, bool) {
  return false;
}
bool cudnn_attention_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                              const Tensor&, const Tensor&, const Tensor&, double, bool) {
  return false;
}
std::vector<std::string> cudnn_attention_graphs() { return {}; }

}  // namespace coil::cuda

#endif
