#include "backends/cuda/flash_attention.h"

#include <algorithm>
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

// The kernel's shape for a dtype and head sizes: query rows and keys a tile, padded feature
// counts, bytes of dynamic shared memory.
struct Plan {
  bool tiles = true;  // the tiled kernel (float32 arithmetic), else a thread a row (float64)
  int64_t rows = 64, keys = 64, ep = 0, evp = 0;
  unsigned shared = 0;
  // Threads a block: two a query row for the tiles ((rows / 4) x 8), else one.
  unsigned threads() const { return static_cast<unsigned>(tiles ? 2 * rows : rows); }
};

Plan plan_for(DType dt, int64_t e, int64_t ev) {
  Plan p;
  p.tiles = dt != kFloat64;
  p.ep = (e + 3) / 4 * 4;
  if (!p.tiles) {
    p.rows = 128;
    p.evp = (ev + 3) / 4 * 4;
    // Keys per tile: 32, or fewer where the tiles would pass 48 KiB of static shared memory.
    p.keys = 32;
    while (p.keys > 8 && p.keys * (p.ep + p.evp) * 8 > 48 * 1024) p.keys /= 2;
    return p;
  }
  p.evp = (ev + 31) / 32 * 32;
  p.keys = p.ep <= 64 ? 64 : 32;
  // The query tile, then two stages of a key tile (whose room the weights take once the scores
  // are made) and a value tile; rows of the query and key tiles and of the weights padded by 4
  // floats, so that the 8 rows a quarter-warp reads at once start in different banks.
  const int64_t qs = p.ep + 4, ps = p.keys + 4;
  const int64_t floats = p.rows * qs + 2 * (std::max(p.keys * qs, p.rows * ps) + p.keys * p.evp);
  p.shared = static_cast<unsigned>(floats * 4);
  return p;
}

// The tiled kernel: a block takes BQ query rows with 2 BQ threads as (BQ / 4) x 8; a thread
// holds 4 rows of the scores of each key tile (keys tx, tx + 8, ...) and 4 rows of the output
// (4 columns in each group of 32: 4 tx, 4 tx + 32, ...). Each key tile: scores from the query
// and key tiles in shared memory (a float4 of 4 features a step), the rows' maxima over the 8
// threads of a row by shuffles, the running sums rescaled, the weights through shared memory
// (in the key tile's room), then weights times the value tile. Every product is a register
// tile of 4 x 8, so each shared load feeds 8 fused multiply-adds or more. Key and value tiles
// are double-buffered: the next one is copied in (cp.async, 16 bytes at a time, where the
// operands are float32 and their rows 16-byte aligned) while this one is used. The row sums
// stay partial per thread until the end (their rescaling is the same in the 8 threads of a row).
std::string tile_kernel(const Plan& p, DType dt, int64_t e, int64_t ev) {
  std::string s = cuda_prelude();
  auto def = [&](const char* name, int64_t v) {
    s += std::string("#define ") + name + " " + std::to_string(v) + "\n";
  };
  def("E", e), def("EP", p.ep), def("EV", ev), def("EVP", p.evp), def("BQ", p.rows);
  def("BK", p.keys), def("MINB", 2);
  def("COPIES", dt == kFloat32 && e % 4 == 0 && ev % 4 == 0);  // cp.async is possible
  s += std::string("typedef ") + memory_type(dt) + " T;\n#define LOAD(x) " +
       from_memory(dt, "(x)") + "\n#define STORE(x) " + to_memory(dt, "(x)") + "\n";
  s += R"(
#define NT (2 * BQ)
#define QS (EP + 4)
#define PS (BK + 4)
#define KROOM (BK * QS > BQ * PS ? BK * QS : BQ * PS)
#define STAGE (KROOM + BK * EVP)
#define KPT (BK / 8)
#define CPT (EVP / 32)
__device__ __forceinline__ float coil_row_max8(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 4));
}
__device__ __forceinline__ void coil_copy16(float* to, const T* from) {
#if COPIES
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n"
               ::"r"((unsigned)__cvta_generic_to_shared(to)), "l"(from));
#endif
}
// Keys and values j0 .. j0 + BK into a stage; rows past S (and features past E) as zeros.
__device__ __forceinline__ void coil_load_tile(float* kt, float* vt, const T* __restrict__ k,
                                               const T* __restrict__ v, i64 j0, i64 S, i64 krow,
                                               i64 vrow, bool fast) {
  if (COPIES && fast) {
    for (int i = threadIdx.x; i < BK * (E / 4); i += NT) {
      const int r = i / (E / 4), c = 4 * (i % (E / 4));
      if (j0 + r < S) coil_copy16(&kt[r * QS + c], k + (j0 + r) * krow + c);
      else *(float4*)&kt[r * QS + c] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    for (int i = threadIdx.x; i < BK * (EV / 4); i += NT) {
      const int r = i / (EV / 4), c = 4 * (i % (EV / 4));
      if (j0 + r < S) coil_copy16(&vt[r * EVP + c], v + (j0 + r) * vrow + c);
      else *(float4*)&vt[r * EVP + c] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    return;
  }
  for (int i = threadIdx.x; i < BK * EP; i += NT) {
    const int r = i / EP, c = i % EP;
    kt[r * QS + c] = j0 + r < S && c < E ? LOAD(k[(j0 + r) * krow + c]) : 0.0f;
  }
  for (int i = threadIdx.x; i < BK * EV; i += NT) {
    const int r = i / EV, c = i % EV;
    vt[r * EVP + c] = j0 + r < S ? LOAD(v[(j0 + r) * vrow + c]) : 0.0f;
  }
}
// (Value columns EV .. EVP are never written: they feed only output columns never stored.)
extern "C" __global__ void __launch_bounds__(NT, MINB)
coil_attention(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
               T* __restrict__ o, i64 L, i64 S, i64 inner, i64 row_blocks, i64 qs0, i64 qs1,
               i64 qrow, i64 ks0, i64 ks1, i64 krow, i64 vs0, i64 vs1, i64 vrow, i64 os0,
               i64 os1, i64 orow, float scale,
               int causal, int fast) {
  extern __shared__ float4 coil_smem4[];
  float* qt = (float*)coil_smem4;  // [BQ][QS], then two stages of keys [BK][QS] and values [BK][EVP]
  const int tx = threadIdx.x % 8, ty = threadIdx.x / 8;
  // The blocks with the most keys first (causal: the last rows), so that the short ones fill
  // the last wave.
  const i64 total = gridDim.x / row_blocks;
  const i64 rb = row_blocks - 1 - blockIdx.x / total, b = blockIdx.x % total;
  const i64 b0 = b / inner, b1 = b % inner;
  q += b0 * qs0 + b1 * qs1;
  k += b0 * ks0 + b1 * ks1;
  v += b0 * vs0 + b1 * vs1;
  o += b0 * os0 + b1 * os1;
  const i64 q0 = rb * BQ;
  // The keys any row of this block sees: all, or up to the block's last row when causal.
  const i64 keys = causal ? min(S, q0 + BQ) : S;
  const i64 tiles = (keys + BK - 1) / BK;
  float* stage0 = qt + BQ * QS;
  if (tiles > 0) coil_load_tile(stage0, stage0 + KROOM, k, v, 0, S, krow, vrow, fast);
  for (int i = threadIdx.x; i < BQ * EP; i += NT) {
    const int r = i / EP, c = i % EP;
    qt[r * QS + c] = q0 + r < L && c < E ? LOAD(q[(q0 + r) * qrow + c]) * scale : 0.0f;
  }
  float acc[4][4 * CPT], m[4], l[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    m[i] = -coil_inf_f();
    l[i] = 0;
#pragma unroll
    for (int c = 0; c < 4 * CPT; ++c) acc[i][c] = 0;
  }
  for (i64 t = 0; t < tiles; ++t) {
    float* kt = stage0 + (t & 1) * STAGE;
    float* vt = kt + KROOM;
#if COPIES
    asm volatile("cp.async.wait_all;\n" ::);
#endif
    __syncthreads();  // tile t is in; every thread is done with tile t - 1's stage
    if (t + 1 < tiles) {
      float* next = stage0 + ((t + 1) & 1) * STAGE;
      coil_load_tile(next, next + KROOM, k, v, (t + 1) * BK, S, krow, vrow, fast);
    }
    const i64 j0 = t * BK;
    float sc[4][KPT];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int c = 0; c < KPT; ++c) sc[i][c] = 0;
#pragma unroll 4
    for (int e4 = 0; e4 < EP / 4; ++e4) {
      float4 qv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) qv[i] = *(const float4*)&qt[(4 * ty + i) * QS + 4 * e4];
#pragma unroll
      for (int c = 0; c < KPT; ++c) {
        const float4 kv = *(const float4*)&kt[(tx + 8 * c) * QS + 4 * e4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
          sc[i][c] = fmaf(qv[i].w, kv.w, fmaf(qv[i].z, kv.z, fmaf(qv[i].y, kv.y, fmaf(qv[i].x, kv.x, sc[i][c]))));
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const i64 row = q0 + 4 * ty + i;
      float mx = m[i];
#pragma unroll
      for (int c = 0; c < KPT; ++c) {
        const i64 j = j0 + tx + 8 * c;
        if (j >= S || (causal && j > row)) sc[i][c] = -coil_inf_f();
        mx = fmaxf(mx, sc[i][c]);
      }
      mx = coil_row_max8(mx);
      // A row that has seen no key yet keeps its zeros (exp2 of -inf).
      const float base = mx == -coil_inf_f() ? 0.0f : mx;
      const float alpha = exp2f(m[i] - base);
      m[i] = mx;
      l[i] *= alpha;
#pragma unroll
      for (int c = 0; c < 4 * CPT; ++c) acc[i][c] *= alpha;
#pragma unroll
      for (int c = 0; c < KPT; ++c) {
        sc[i][c] = exp2f(sc[i][c] - base);
        l[i] += sc[i][c];
      }
    }
    __syncthreads();  // every thread's scores are made: the key tile's room takes the weights
    float* pt = kt;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int c = 0; c < KPT; ++c) pt[(4 * ty + i) * PS + tx + 8 * c] = sc[i][c];
    __syncthreads();
#pragma unroll 2
    for (int j4 = 0; j4 < BK / 4; ++j4) {
      float4 pv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) pv[i] = *(const float4*)&pt[(4 * ty + i) * PS + 4 * j4];
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
#pragma unroll
        for (int g = 0; g < CPT; ++g) {
          const float4 vv = *(const float4*)&vt[(4 * j4 + jj) * EVP + 4 * tx + 32 * g];
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const float w = jj == 0 ? pv[i].x : jj == 1 ? pv[i].y : jj == 2 ? pv[i].z : pv[i].w;
            acc[i][4 * g] = fmaf(w, vv.x, acc[i][4 * g]);
            acc[i][4 * g + 1] = fmaf(w, vv.y, acc[i][4 * g + 1]);
            acc[i][4 * g + 2] = fmaf(w, vv.z, acc[i][4 * g + 2]);
            acc[i][4 * g + 3] = fmaf(w, vv.w, acc[i][4 * g + 3]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float sum = l[i];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    sum += __shfl_xor_sync(0xffffffffu, sum, 4);
    const i64 row = q0 + 4 * ty + i;
    if (row >= L) continue;
    const float inv = sum > 0 ? 1.0f / sum : 0.0f;  // no key at all: zeros, as the safe softmax
#pragma unroll
    for (int g = 0; g < CPT; ++g)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int col = 32 * g + 4 * tx + c;
        if (col < EV) o[row * orow + col] = STORE(acc[i][4 * g + c] * inv);
      }
  }
}
)";
  return s;
}

// Float64's kernel: one thread a query row, its scaled query and its output accumulators in
// registers, tiles of keys and values in shared memory (every thread reads the same key at
// once: a broadcast). Keys go in groups of 8: the scores of a group, then one rescale of the
// running sums by exp2(old max - new max), then the group's weights times its values.
std::string row_kernel(const Plan& p, int64_t e, int64_t ev) {
  std::string s = cuda_prelude();
  s += "#define E " + std::to_string(e) + "\n#define EP " + std::to_string(p.ep) + "\n#define EV " +
       std::to_string(ev) + "\n#define EVP " + std::to_string(p.evp) + "\n#define ROWS " +
       std::to_string(p.rows) + "\n#define KEYS " + std::to_string(p.keys) +
       "\ntypedef double C;\ntypedef double T;\n#define LOAD(x) (x)\n#define STORE(x) (x)\n"
       "#define EXP2(x) exp2(x)\n#define FMA(a, b, c) fma(a, b, c)\n"
       "#define NEG_INF (-coil_inf_d())\n";
  s += R"(
#define GROUP 8
struct __align__(4 * sizeof(C)) C4 { C x, y, z, w; };
extern "C" __global__ void __launch_bounds__(ROWS)
coil_attention(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
               T* __restrict__ o, i64 L, i64 S, i64 inner, i64 row_blocks, i64 qs0, i64 qs1,
               i64 qrow, i64 ks0, i64 ks1, i64 krow, i64 vs0, i64 vs1, i64 vrow, i64 os0,
               i64 os1, i64 orow, C scale,
               int causal) {
  __shared__ C4 kt[KEYS][EP / 4];
  __shared__ C4 vt[KEYS][EVP / 4];
  const i64 rb = blockIdx.x % row_blocks, b = blockIdx.x / row_blocks;
  const i64 b0 = b / inner, b1 = b % inner;
  q += b0 * qs0 + b1 * qs1;
  k += b0 * ks0 + b1 * ks1;
  v += b0 * vs0 + b1 * vs1;
  o += b0 * os0 + b1 * os1;
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
  for (int e = 0; e < EV; ++e) o[row * orow + e] = STORE(acc[e] * inv);
}
)";
  return s;
}

}  // namespace

// Scores are in base 2 (the scale is multiplied by log2(e) into the query), so the
// exponentials are exp2. Feature counts are padded with zeros, for 16-byte shared loads. The
// products are explicit fused multiply-adds: coil compiles with --fmad=false, which would
// otherwise split every one in two.
std::string attention_kernel_source(DType dt, int64_t e, int64_t ev) {
  const Plan p = plan_for(dt, e, ev);
  return p.tiles ? tile_kernel(p, dt, e, ev) : row_kernel(p, e, ev);
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

}  // namespace

AttentionOperand attention_operand(const Tensor& x, const Shape& batch, bool result) {
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
  if (!folds(t)) {
    COIL_ASSERT(!result, "attention on the GPU: a result of sizes ", shape_str(x.sizes()),
                " and strides ", shape_str(x.strides()), " whose batch does not fold");
    t = contiguous_copy(t);
  }
  AttentionOperand op{t};
  op.inner = n >= 1 ? t.strides()[n - 1] : 0;
  op.outer = n >= 2 ? t.strides()[n - 2] : 0;
  op.row = t.stride(-2);
  return op;
}

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
  const Plan p = plan_for(dt, e, ev);
  const int64_t row_blocks = (L + p.rows - 1) / p.rows;
  COIL_CHECK(total * row_blocks < (int64_t{1} << 31), "attention on the GPU: ", total,
             " batches of ", L, " queries exceed the grid; split the batch");
  const AttentionOperand qo = attention_operand(q, batch), ko = attention_operand(k, batch),
                         vo = attention_operand(v, batch), oo = attention_operand(out, batch, true);
  const int device = out.device().index;
  void* fn = kernel(device, dt, e, ev);
  const void* qp = qo.t.impl()->data();
  const void* kp = ko.t.impl()->data();
  const void* vp = vo.t.impl()->data();
  void* op = oo.t.impl()->data();
  int64_t args64[] = {L,      S,        inner,    row_blocks, qo.outer, qo.inner,
                      qo.row, ko.outer, ko.inner, ko.row,     vo.outer, vo.inner,
                      vo.row, oo.outer, oo.inner, oo.row};
  double scale2 = scale * 1.4426950408889634;  // scores in base 2: exp2 for exp
  float scale2f = static_cast<float>(scale2);
  int causal_flag = causal ? 1 : 0;
  // Keys and values copied 16 bytes at a time: float32 rows that start 16-byte aligned.
  auto aligned = [](const AttentionOperand& x) {
    return reinterpret_cast<uintptr_t>(x.t.impl()->data()) % 16 == 0 && x.outer % 4 == 0 &&
           x.inner % 4 == 0 && x.row % 4 == 0;
  };
  int fast = dt == kFloat32 && aligned(ko) && aligned(vo) ? 1 : 0;
  std::vector<void*> params = {&qp, &kp, &vp, &op};
  for (int64_t& a : args64) params.push_back(&a);
  params.push_back(dt == kFloat64 ? static_cast<void*>(&scale2) : static_cast<void*>(&scale2f));
  params.push_back(&causal_flag);
  if (p.tiles) params.push_back(&fast);
  launch(fn, "coil_attention", device, static_cast<unsigned>(total * row_blocks), p.threads(),
         p.shared, params.data());
}

}  // namespace coil::cuda
