#define E 64
#define EP 64
#define EV 64
#define EVP 64
#define BQ 64
#define BK 64
#define MINB 2
#define COPIES 1
typedef float T;
#define LOAD(x) (float)((x))
#define STORE(x) (float)((x))

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
               i64 qrow, i64 ks0, i64 ks1, i64 krow, i64 vs0, i64 vs1, i64 vrow, float scale,
               int causal, int fast) {
  extern __shared__ float4 coil_smem4[];
  float* qt = (float*)coil_smem4;  // [BQ][QS], then two stages of keys [BK][QS] and values [BK][EVP]
  const int tx = threadIdx.x % 8, ty = threadIdx.x / 8;
  const i64 rb = blockIdx.x % row_blocks, b = blockIdx.x / row_blocks;
  const i64 b0 = b / inner, b1 = b % inner;
  q += b0 * qs0 + b1 * qs1;
  k += b0 * ks0 + b1 * ks1;
  v += b0 * vs0 + b1 * vs1;
  o += b * L * EV;
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
        if (col < EV) o[row * EV + col] = STORE(acc[i][4 * g + c] * inv);
      }
  }
}
