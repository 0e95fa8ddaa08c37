#include "backends/cuda/flash_attention_backward.h"

#include <coil/error.h>

#include "backends/cuda/cuda_compiler.h"
#include "backends/cuda/cuda_prelude.h"
#include "backends/cuda/driver.h"
#include "backends/cuda/flash_attention.h"
#include "runtime/copy.h"
#include "runtime/tensor_impl.h"

namespace coil::cuda {

namespace {

// Tiles of 64 queries and 64 keys, 256 threads a block; shared rows of 64 floats padded by 4, so
// that the 8 rows a quarter-warp reads at once start in different banks.
constexpr int64_t kTile = 64;
constexpr unsigned kThreads = 256;
constexpr unsigned kRowFloats = 68;
constexpr unsigned kRowsShared = 2 * kTile * kRowFloats * 4;  // queries and keys
constexpr unsigned kMainShared = 6 * kTile * kRowFloats * 4 + 2 * kTile * 4;

// Two kernels (float32). coil_attention_rows, a block per 64 query rows: each row's
// log-sum-exp of its scaled scores in base 2 (the forward's softmax statistics, made again:
// the forward op keeps only its output) and D = rowsum(dO * O). coil_attention_backward, a
// block per 64 keys, which go through every block of queries that sees them (from the keys'
// own block on when causal): S = Q K^T and dP = dO V^T with a 4 x 4 register tile each per
// thread (queries ty + 16 i, keys tx + 16 j: conflict-free float4 rows), P = exp2(S s - lse),
// dS = P (dP - D); P and dS through shared memory, then dV += P^T dO and dK += dS^T Q in
// registers (keys 4 ty + i, features 4 tx + c), then dS transposed into P's room and
// dQ += dS K, added to dQ in global memory atomically (each block of keys adds its share).
const char* kKernels = R"(
#define RS 68
struct coil_operand { const float* p; i64 outer, inner, row; };
__device__ __forceinline__ const float* coil_at(const coil_operand& x, i64 b, i64 inner) {
  return x.p + (b / inner) * x.outer + (b % inner) * x.inner;
}
// Rows r0 .. r0 + 64 of x (features past E and rows past L as zeros) into t[64][RS]; 16 bytes
// at a time where every operand's rows start 16-byte aligned (vec).
__device__ __forceinline__ void coil_tile(float* t, const float* x, i64 row, i64 r0, i64 L,
                                          int vec) {
  if (vec) {
    for (int i = threadIdx.x; i < 64 * 16; i += 256) {
      const int r = i / 16, c = 4 * (i % 16);
      *(float4*)&t[r * RS + c] = r0 + r < L && c < E ? *(const float4*)&x[(r0 + r) * row + c]
                                                     : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    return;
  }
  for (int i = threadIdx.x; i < 64 * 64; i += 256) {
    const int r = i / 64, c = i % 64;
    t[r * RS + c] = r0 + r < L && c < E ? x[(r0 + r) * row + c] : 0.0f;
  }
}
__device__ __forceinline__ float coil_dot4(float4 a, float4 b, float acc) {
  return fmaf(a.w, b.w, fmaf(a.z, b.z, fmaf(a.y, b.y, fmaf(a.x, b.x, acc))));
}
extern "C" __global__ void __launch_bounds__(256)
coil_attention_rows(coil_operand q, coil_operand k, coil_operand g, coil_operand o,
                    float* __restrict__ lse, float* __restrict__ dd, i64 L, i64 inner,
                    i64 row_blocks, float scale2, int causal, int vec) {
  extern __shared__ float4 coil_smem4[];
  float* qs = (float*)coil_smem4;
  float* ks = qs + 64 * RS;
  coil_wait_previous_kernel();
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  // The blocks with the most keys first (causal: the last rows), so that the short ones fill
  // the last wave.
  const i64 total = gridDim.x / row_blocks;
  const i64 rb = row_blocks - 1 - blockIdx.x / total, b = blockIdx.x % total, i0 = rb * 64;
  const float* qp = coil_at(q, b, inner);
  const float* kp = coil_at(k, b, inner);
  coil_tile(qs, qp, q.row, i0, L, vec);
  {  // D: four threads a row
    const int r = threadIdx.x / 4, c = threadIdx.x % 4;
    const float* gp = coil_at(g, b, inner);
    const float* op = coil_at(o, b, inner);
    float d = 0;
    if (i0 + r < L)
      for (int e = c; e < E; e += 4) d = fmaf(gp[(i0 + r) * g.row + e], op[(i0 + r) * o.row + e], d);
    d += __shfl_xor_sync(0xffffffffu, d, 1);
    d += __shfl_xor_sync(0xffffffffu, d, 2);
    if (c == 0 && i0 + r < L) dd[b * L + i0 + r] = d;
  }
  float m[4], l[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) m[i] = -coil_inf_f(), l[i] = 0;
  const i64 keys = causal ? min(L, i0 + 64) : L;
  for (i64 j0 = 0; j0 < keys; j0 += 64) {
    __syncthreads();  // every thread is done with the last key tile
    coil_tile(ks, kp, k.row, j0, L, vec);
    __syncthreads();
    float s[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) s[i][j] = 0;
#pragma unroll 4
    for (int e4 = 0; e4 < 16; ++e4) {
      float4 qv[4], kv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) qv[i] = *(const float4*)&qs[(ty + 16 * i) * RS + 4 * e4];
#pragma unroll
      for (int j = 0; j < 4; ++j) kv[j] = *(const float4*)&ks[(tx + 16 * j) * RS + 4 * e4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) s[i][j] = coil_dot4(qv[i], kv[j], s[i][j]);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const i64 row = i0 + ty + 16 * i;
      float mx = m[i];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const i64 key = j0 + tx + 16 * j;
        s[i][j] = key < L && (!causal || key <= row) ? s[i][j] * scale2 : -coil_inf_f();
        mx = fmaxf(mx, s[i][j]);
      }
      if (mx == -coil_inf_f()) continue;
      l[i] *= exp2f(m[i] - mx);
#pragma unroll
      for (int j = 0; j < 4; ++j) l[i] += exp2f(s[i][j] - mx);
      m[i] = mx;
    }
  }
  // The 16 threads of a row (tx) meet: their maxima, then their sums rescaled to it.
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float mx = m[i];
    for (int w = 1; w < 16; w *= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, w));
    float sum = mx == -coil_inf_f() ? 0.0f : l[i] * exp2f(m[i] - mx);
    for (int w = 1; w < 16; w *= 2) sum += __shfl_xor_sync(0xffffffffu, sum, w);
    const i64 row = i0 + ty + 16 * i;
    // A row with no key: +inf, so that every weight exp2(s - lse) is 0.
    if (tx == 0 && row < L) lse[b * L + row] = sum > 0 ? mx + log2f(sum) : coil_inf_f();
  }
}
extern "C" __global__ void __launch_bounds__(256, 2)
coil_attention_backward(coil_operand q, coil_operand k, coil_operand v, coil_operand g,
                        const float* __restrict__ lse, const float* __restrict__ dd,
                        coil_operand dq, coil_operand dk, coil_operand dv,
                        i64 L, i64 inner, i64 key_blocks, float scale2, float scale, int causal,
                        int vec) {
  extern __shared__ float4 coil_smem4[];
  float* ks = (float*)coil_smem4;
  float* vs = ks + 64 * RS;
  float* qs = vs + 64 * RS;
  float* gs = qs + 64 * RS;
  float* ps = gs + 64 * RS;  // P[q][k]; then dS transposed, [k][q]
  float* ds = ps + 64 * RS;  // dS[q][k]
  float* rl = ds + 64 * RS;  // the query block's lse, then its D
  float* rd = rl + 64;
  coil_wait_previous_kernel();
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  // The blocks with the most queries first (causal: the first keys).
  const i64 total = gridDim.x / key_blocks;
  const i64 kb = blockIdx.x / total, b = blockIdx.x % total, j0 = kb * 64;
  const float* qp = coil_at(q, b, inner);
  const float* gp = coil_at(g, b, inner);
  float* dqp = (float*)coil_at(dq, b, inner);
  coil_tile(ks, coil_at(k, b, inner), k.row, j0, L, vec);
  coil_tile(vs, coil_at(v, b, inner), v.row, j0, L, vec);
  float dka[4][4], dva[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int c = 0; c < 4; ++c) dka[i][c] = 0, dva[i][c] = 0;
  for (i64 i0 = causal ? j0 : 0; i0 < L; i0 += 64) {
    __syncthreads();  // every thread is done with the last query block's tiles
    coil_tile(qs, qp, q.row, i0, L, vec);
    coil_tile(gs, gp, g.row, i0, L, vec);
    if (threadIdx.x < 64) {
      const i64 row = i0 + threadIdx.x;
      rl[threadIdx.x] = row < L ? lse[b * L + row] : coil_inf_f();
      rd[threadIdx.x] = row < L ? dd[b * L + row] : 0.0f;
    }
    __syncthreads();
    float s[4][4], dp[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) s[i][j] = 0, dp[i][j] = 0;
#pragma unroll 2
    for (int e4 = 0; e4 < 16; ++e4) {
      float4 qv[4], gv[4], kv[4], vv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        qv[i] = *(const float4*)&qs[(ty + 16 * i) * RS + 4 * e4];
        gv[i] = *(const float4*)&gs[(ty + 16 * i) * RS + 4 * e4];
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        kv[j] = *(const float4*)&ks[(tx + 16 * j) * RS + 4 * e4];
        vv[j] = *(const float4*)&vs[(tx + 16 * j) * RS + 4 * e4];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          s[i][j] = coil_dot4(qv[i], kv[j], s[i][j]);
          dp[i][j] = coil_dot4(gv[i], vv[j], dp[i][j]);
        }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = ty + 16 * i;
      const i64 row = i0 + r;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int c = tx + 16 * j;
        const i64 key = j0 + c;
        const bool seen = row < L && key < L && (!causal || key <= row);
        const float p = seen ? exp2f(s[i][j] * scale2 - rl[r]) : 0.0f;
        ps[r * RS + c] = p;
        s[i][j] = p * (dp[i][j] - rd[r]);  // dS, kept for its transposed copy below
        ds[r * RS + c] = s[i][j];
      }
    }
    __syncthreads();
#pragma unroll 4
    for (int r = 0; r < 64; ++r) {
      const float4 p4 = *(const float4*)&ps[r * RS + 4 * ty];
      const float4 s4 = *(const float4*)&ds[r * RS + 4 * ty];
      const float4 g4 = *(const float4*)&gs[r * RS + 4 * tx];
      const float4 q4 = *(const float4*)&qs[r * RS + 4 * tx];
      const float pv[4] = {p4.x, p4.y, p4.z, p4.w}, sv[4] = {s4.x, s4.y, s4.z, s4.w};
      const float gvv[4] = {g4.x, g4.y, g4.z, g4.w}, qvv[4] = {q4.x, q4.y, q4.z, q4.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          dva[i][c] = fmaf(pv[i], gvv[c], dva[i][c]);
          dka[i][c] = fmaf(sv[i], qvv[c], dka[i][c]);
        }
    }
    __syncthreads();  // P is read: its room takes dS transposed
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) ps[(tx + 16 * j) * RS + ty + 16 * i] = s[i][j];
    __syncthreads();
    float dqa[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int c = 0; c < 4; ++c) dqa[i][c] = 0;
#pragma unroll 4
    for (int j = 0; j < 64; ++j) {
      const float4 s4 = *(const float4*)&ps[j * RS + 4 * ty];
      const float4 k4 = *(const float4*)&ks[j * RS + 4 * tx];
      const float sv[4] = {s4.x, s4.y, s4.z, s4.w}, kvv[4] = {k4.x, k4.y, k4.z, k4.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int c = 0; c < 4; ++c) dqa[i][c] = fmaf(sv[i], kvv[c], dqa[i][c]);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const i64 row = i0 + 4 * ty + i;
      if (row >= L) continue;
#pragma unroll
      for (int c = 0; c < 4; ++c)
        if (4 * tx + c < E) atomicAdd(&dqp[row * dq.row + 4 * tx + c], dqa[i][c] * scale);
    }
  }
  float* dkp = (float*)coil_at(dk, b, inner);
  float* dvp = (float*)coil_at(dv, b, inner);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const i64 key = j0 + 4 * ty + i;
    if (key >= L) continue;
#pragma unroll
    for (int c = 0; c < 4; ++c)
      if (4 * tx + c < E) {
        dkp[key * dk.row + 4 * tx + c] = dka[i][c] * scale;
        dvp[key * dv.row + 4 * tx + c] = dva[i][c];
      }
  }
}
)";

// The kernels' view of an operand (flash_attention.h's AttentionOperand, by its pointer).
struct KernelOperand {
  const void* p;
  int64_t outer, inner, row;
};
KernelOperand kernel_operand(const AttentionOperand& x) {
  return {x.t.impl()->data(), x.outer, x.inner, x.row};
}

}  // namespace

std::string attention_backward_source(int64_t e) {
  return cuda_prelude() + "#define E " + std::to_string(e) + "\n" + kKernels;
}

bool attention_backward_fits(const Tensor& q) {
  return q.dtype() == kFloat32 && q.dim() >= 2 && q.size(-1) >= 1 &&
         q.size(-1) <= kAttentionBackwardMaxHead;
}

void attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& o, const Tensor& grads, double scale, bool causal) {
  if (grads.numel() == 0) return;
  const Shape batch(q.sizes().begin(), q.sizes().end() - 2);
  const int64_t total = numel_of(batch), L = q.size(-2), e = q.size(-1);
  const int64_t inner = batch.empty() ? 1 : batch.back();
  const int64_t blocks = (L + kTile - 1) / kTile;
  COIL_CHECK(total * blocks < (int64_t{1} << 31), "attention's backward on the GPU: ", total,
             " batches of ", L, " queries exceed the grid; split the batch");
  const int device = q.device().index;
  // Both kernels of one module, compiled on first use (or shipped: heads of 64) and kept.
  const std::string module = "attention_backward_f32_" + std::to_string(e);
  auto source = [e] { return attention_backward_source(e); };
  void* rows = hand_written_kernel(device, module, "coil_attention_rows", source);
  void* backward = hand_written_kernel(device, module, "coil_attention_backward", source);
  // (The operands hold the copies of those whose layout does not fold, until the launches.)
  const AttentionOperand qa = attention_operand(q, batch), ka = attention_operand(k, batch),
                         va = attention_operand(v, batch), ga = attention_operand(g, batch),
                         oa = attention_operand(o, batch);
  KernelOperand qo = kernel_operand(qa), ko = kernel_operand(ka), vo = kernel_operand(va),
                go = kernel_operand(ga), oo = kernel_operand(oa);
  // The gradients where grads has them (the meta's layout: one projection's); dq is a sum of
  // the key blocks' shares.
  const AttentionOperand dqa = attention_operand(grads.select(0, 0), batch, true),
                         dka = attention_operand(grads.select(0, 1), batch, true),
                         dva = attention_operand(grads.select(0, 2), batch, true);
  fill(dqa.t, Scalar(0.0));
  KernelOperand dq = kernel_operand(dqa), dk = kernel_operand(dka), dv = kernel_operand(dva);
  Tensor stats = empty_contiguous({2, total * L}, kFloat32, q.device());
  float* lse = stats.data_ptr<float>();
  float* dd = lse + total * L;
  float scale2 = static_cast<float>(scale * 1.4426950408889634);  // scores in base 2
  float scalef = static_cast<float>(scale);
  int causal_flag = causal ? 1 : 0;
  auto aligned = [](const KernelOperand& x) {
    return reinterpret_cast<uintptr_t>(x.p) % 16 == 0 && x.outer % 4 == 0 && x.inner % 4 == 0 &&
           x.row % 4 == 0;
  };
  int vec = e % 4 == 0 && aligned(qo) && aligned(ko) && aligned(vo) && aligned(go) ? 1 : 0;
  int64_t L_ = L, inner_ = inner, blocks_ = blocks;
  void* rows_args[] = {&qo, &ko,     &go,      &oo,     &lse,         &dd,
                       &L_, &inner_, &blocks_, &scale2, &causal_flag, &vec};
  launch(rows, "coil_attention_rows", device, static_cast<unsigned>(total * blocks), kThreads,
         kRowsShared, rows_args, /*after_previous=*/true);
  void* args[] = {&qo, &ko, &vo,     &go,      &lse,    &dd,     &dq,          &dk,
                  &dv, &L_, &inner_, &blocks_, &scale2, &scalef, &causal_flag, &vec};
  launch(backward, "coil_attention_backward", device, static_cast<unsigned>(total * blocks),
         kThreads, kMainShared, args, /*after_previous=*/true);
}

}  // namespace coil::cuda
