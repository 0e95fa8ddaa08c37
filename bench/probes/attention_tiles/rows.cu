#define E 64
#define EP 64
#define EV 64
#define EVP 64
#define ROWS 128
typedef float C;
typedef float T;
#define LOAD(x) (float)((x))
#define STORE(x) (float)((x))
#define EXP2(x) exp2f(x)
#define FMA(a, b, c) fmaf(a, b, c)
#define KEYS 32
#define NEG_INF (-coil_inf_f())

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
