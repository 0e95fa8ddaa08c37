#include "backends/cuda/flash_attention.h"

#include <map>
#include <mutex>
#include <tuple>

#include <coil/error.h>

#include "backends/cuda/cuda_compiler.h"
#include "backends/cuda/cuda_expr.h"
#include "backends/cuda/cuda_prelude.h"
#include "backends/cuda/driver.h"
#include "runtime/copy.h"
#include "runtime/cuda_runtime.h"
#include "runtime/loops.h"
#include "runtime/tensor_impl.h"

namespace coil::cuda {

namespace {

constexpr int kRows = 128;  // query rows per block, one per thread

}  // namespace

// One thread per query row: its scaled query and its output accumulators in registers, tiles of
// keys and values in shared memory (every thread reads the same key at once: a broadcast).
// Keys go in groups of 8: the scores of a group, then one rescale of the running sums by
// exp2(old max - new max), then the group's weights times its values. Scores are in base 2
// (the scale is multiplied by log2(e) into the query), so the exponentials are exp2. Feature
// counts are padded to a multiple of 4 with zeros, for 16-byte shared loads. The products are
// explicit fused multiply-adds: coil compiles with --fmad=false, which would otherwise split
// every one in two.
std::string attention_kernel_source(DType dt, int64_t e, int64_t ev) {
  const std::string c = codegen::compute_type(dt);  // float, or double for float64
  const int64_t ep = (e + 3) / 4 * 4, evp = (ev + 3) / 4 * 4;
  // Keys per tile: 32, or fewer where the tiles would pass the 48 KiB of static shared memory.
  int64_t keys = 32;
  while (keys > 8 && keys * (ep + evp) * static_cast<int64_t>(dt == kFloat64 ? 8 : 4) > 48 * 1024)
    keys /= 2;
  std::string s = cuda_prelude();
  s += "#define E " + std::to_string(e) + "\n#define EP " + std::to_string(ep) + "\n#define EV " +
       std::to_string(ev) + "\n#define EVP " + std::to_string(evp) + "\n#define ROWS " +
       std::to_string(kRows) + "\ntypedef " + c + " C;\ntypedef " + memory_type(dt) + " T;\n" +
       "#define LOAD(x) " + from_memory(dt, "(x)") + "\n#define STORE(x) " + to_memory(dt, "(x)") +
       "\n#define EXP2(x) " + (dt == kFloat64 ? "exp2(x)" : "exp2f(x)") +
       "\n#define FMA(a, b, c) " + (dt == kFloat64 ? "fma(a, b, c)" : "fmaf(a, b, c)") +
       "\n#define KEYS " + std::to_string(keys) + "\n" + "#define NEG_INF (-" +
       (dt == kFloat64 ? "coil_inf_d()" : "coil_inf_f()") + ")\n";
  s += R"(
#define GROUP 8
struct __align__(4 * sizeof(C)) C4 { C x, y, z, w; };
extern "C" __global__ void __launch_bounds__(ROWS)
coil_attention(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
               T* __restrict__ o, i64 L, i64 S, i64 inner, i64 row_blocks, i64 qs0, i64 qs1,
               i64 qrow, i64 ks0, i64 ks1, i64 krow, i64 vs0, i64 vs1, i64 vrow, C scale,
               int causal) {
  __shared__ C4 kt[KEYS][EP / 4];
  __shared__ C4 vt[KEYS][EVP / 4];
  const i64 rb = blockIdx.x % row_blocks, b = blockIdx.x / row_blocks;
  const i64 b0 = b / inner, b1 = b % inner;
  q += b0 * qs0 + b1 * qs1;
  k += b0 * ks0 + b1 * ks1;
  v += b0 * vs0 + b1 * vs1;
  o += b * L * EV;
  const i64 row = rb * ROWS + threadIdx.x;
  const bool active = row < L;
  C qr[EP], acc[EVP];
#pragma unroll
  for (int e = 0; e < EP; ++e) qr[e] = active && e < E ? LOAD(q[row * qrow + e]) * scale : C(0);
#pragma unroll
  for (int e = 0; e < EVP; ++e) acc[e] = 0;
  C m = NEG_INF, l = 0;
  // The keys any row of this block sees: all, or up to the block's last row when causal.
  const i64 keys = causal ? min(S, (rb + 1) * ROWS) : S;
  for (i64 j0 = 0; j0 < keys; j0 += KEYS) {
    __syncthreads();
    for (int i = threadIdx.x; i < KEYS * EP; i += ROWS) {
      const int r = i / EP, c = i % EP;
      const i64 j = j0 + r;
      ((C*)kt[r])[c] = j < S && c < E ? LOAD(k[j * krow + c]) : C(0);
    }
    for (int i = threadIdx.x; i < KEYS * EVP; i += ROWS) {
      const int r = i / EVP, c = i % EVP;
      const i64 j = j0 + r;
      ((C*)vt[r])[c] = j < S && c < EV ? LOAD(v[j * vrow + c]) : C(0);
    }
    __syncthreads();
    if (!active) continue;
    // This row's keys in the tile: up to the row itself when causal.
    i64 n = min((i64)KEYS, S - j0);
    if (causal) n = min(n, row - j0 + 1);
    for (int g0 = 0; g0 < n; g0 += GROUP) {
      C s[GROUP];
#pragma unroll
      for (int g = 0; g < GROUP; ++g) s[g] = 0;
#pragma unroll
      for (int e4 = 0; e4 < EP / 4; ++e4) {
#pragma unroll
        for (int g = 0; g < GROUP; ++g) {
          const C4 kv = kt[g0 + g][e4];
          s[g] = FMA(qr[4 * e4 + 3], kv.w,
                     FMA(qr[4 * e4 + 2], kv.z, FMA(qr[4 * e4 + 1], kv.y, FMA(qr[4 * e4], kv.x, s[g]))));
        }
      }
      C mg = m;
#pragma unroll
      for (int g = 0; g < GROUP; ++g) {
        if (g0 + g >= n) s[g] = NEG_INF;
        mg = max(mg, s[g]);
      }
      const C alpha = EXP2(m - mg);
      m = mg;
      l *= alpha;
#pragma unroll
      for (int e = 0; e < EVP; ++e) acc[e] *= alpha;
#pragma unroll
      for (int g = 0; g < GROUP; ++g) {
        const C p = EXP2(s[g] - mg);
        l += p;
#pragma unroll
        for (int e4 = 0; e4 < EVP / 4; ++e4) {
          const C4 vv = vt[g0 + g][e4];
          acc[4 * e4] = FMA(p, vv.x, acc[4 * e4]);
          acc[4 * e4 + 1] = FMA(p, vv.y, acc[4 * e4 + 1]);
          acc[4 * e4 + 2] = FMA(p, vv.z, acc[4 * e4 + 2]);
          acc[4 * e4 + 3] = FMA(p, vv.w, acc[4 * e4 + 3]);
        }
      }
    }
  }
  if (!active) return;
  const C inv = l > 0 ? C(1) / l : C(0);  // no key at all: zeros, as the safe softmax
#pragma unroll
  for (int e = 0; e < EV; ++e) o[row * EV + e] = STORE(acc[e] * inv);
}
)";
  return s;
}

namespace {

// The kernel for (device, dtype, head sizes), compiled on first use and kept.
void* kernel(int device, DType dt, int64_t e, int64_t ev) {
  static std::mutex mutex;
  static auto* loaded = new std::map<std::tuple<int, DType, int64_t, int64_t>,
                                     std::pair<std::shared_ptr<const jit::Module>, void*>>();
  std::lock_guard<std::mutex> lock(mutex);
  auto key = std::make_tuple(device, dt, e, ev);
  auto it = loaded->find(key);
  if (it == loaded->end()) {
    NvrtcCompiler compiler(device);
    auto m = jit::load(attention_kernel_source(dt, e, ev), compiler,
                       "attention_" + std::string(dtype_short_name(dt)) + "_" + std::to_string(e) +
                           "_" + std::to_string(ev));
    void* f = static_cast<const CudaModule&>(*m).function("coil_attention");
    it = loaded->emplace(key, std::make_pair(m, f)).first;
  }
  return it->second.second;
}

// An operand as the kernel reads it: its batch folded into two levels (outer, inner) with a
// stride each, then rows, with unit stride along the features. A broadcast batch dim has stride
// 0; a layout that does not fold is copied first.
struct Operand {
  Tensor t;
  int64_t outer = 0, inner = 0, row = 0;
};

Operand operand(const Tensor& x, const Shape& batch) {
  Shape sizes = batch;
  sizes.push_back(x.size(-2));
  sizes.push_back(x.size(-1));
  Tensor t = alias_with(x, sizes, broadcast_strides(x, sizes), x.storage_offset());
  const size_t n = batch.size();
  auto folds = [&](const Tensor& u) {
    if (u.stride(-1) != 1 && u.size(-1) > 1) return false;
    for (size_t i = 0; i + 2 < n; ++i)
      if (u.sizes()[i] > 1 && u.strides()[i] != u.strides()[i + 1] * u.sizes()[i + 1]) return false;
    return true;
  };
  if (!folds(t)) t = contiguous_copy(t);
  Operand op{t};
  op.inner = n >= 1 ? t.strides()[n - 1] : 0;
  op.outer = n >= 2 ? t.strides()[n - 2] : 0;
  op.row = t.stride(-2);
  return op;
}

}  // namespace

bool attention_fits(int64_t head, int64_t value_head) {
  return head <= kFusedAttentionMaxHead && value_head <= kFusedAttentionMaxHead;
}

void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, double scale,
               bool causal) {
  if (out.numel() == 0) return;
  const DType dt = out.dtype();
  const int64_t e = q.size(-1), ev = v.size(-1);
  COIL_ASSERT(attention_fits(e, ev), "attention on the GPU: head sizes ", e, " and ", ev,
              " are past the fused kernel's ", kFusedAttentionMaxHead);
  const Shape batch(out.sizes().begin(), out.sizes().end() - 2);
  const int64_t inner = batch.empty() ? 1 : batch.back();
  const int64_t total = numel_of(batch), L = out.size(-2), S = k.size(-2);
  const int64_t row_blocks = (L + kRows - 1) / kRows;
  COIL_CHECK(total * row_blocks < (int64_t{1} << 31), "attention on the GPU: ", total,
             " batches of ", L, " queries exceed the grid; split the batch");
  const Operand qo = operand(q, batch), ko = operand(k, batch), vo = operand(v, batch);
  const int device = out.device().index;
  void* fn = kernel(device, dt, e, ev);
  const void* qp = qo.t.impl()->data();
  const void* kp = ko.t.impl()->data();
  const void* vp = vo.t.impl()->data();
  void* op = out.impl()->data();
  int64_t args64[] = {L,        S,        inner,  row_blocks, qo.outer, qo.inner, qo.row,
                      ko.outer, ko.inner, ko.row, vo.outer,   vo.inner, vo.row};
  double scale2 = scale * 1.4426950408889634;  // scores in base 2: exp2 for exp
  float scale2f = static_cast<float>(scale2);
  int causal_flag = causal ? 1 : 0;
  std::vector<void*> params = {&qp, &kp, &vp, &op};
  for (int64_t& a : args64) params.push_back(&a);
  params.push_back(dt == kFloat64 ? static_cast<void*>(&scale2) : static_cast<void*>(&scale2f));
  params.push_back(&causal_flag);
  launch(fn, "coil_attention", device, static_cast<unsigned>(total * row_blocks), kRows, 0,
         params.data());
}

}  // namespace coil::cuda
