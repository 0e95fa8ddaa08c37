// coil's CUDA prelude, as every generated source starts (coil codegen --source), for the probes
// that compile coil's kernels where coil is not built.
typedef long long i64;
typedef unsigned long long u64;
#define COIL_FULL_MASK 0xffffffffu
__device__ __forceinline__ float coil_nan_f() { return __int_as_float(0x7fc00000); }
__device__ __forceinline__ float coil_inf_f() { return __int_as_float(0x7f800000); }
__device__ __forceinline__ double coil_nan_d() { return __longlong_as_double(0x7ff8000000000000LL); }
__device__ __forceinline__ double coil_inf_d() { return __longlong_as_double(0x7ff0000000000000LL); }
template <typename T> __device__ __forceinline__ T smax(T a, T b) { return (a > b || a != a) ? a : b; }
template <typename T> __device__ __forceinline__ T smin(T a, T b) { return (a < b || a != a) ? a : b; }
template <typename T> __device__ __forceinline__ T coil_sign(T a) { return (T)((T(0) < a) - (a < T(0))); }
template <typename T> __device__ __forceinline__ T coil_floordiv_int(T a, T b) {
  T q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
template <typename T> __device__ __forceinline__ T coil_mod_int(T a, T b) {
  T m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}
__device__ __forceinline__ i64 coil_floordiv(i64 a, i64 b) { return coil_floordiv_int(a, b); }
__device__ __forceinline__ i64 coil_mod(i64 a, i64 b) { return coil_mod_int(a, b); }
// A division by a size known only when the kernel runs, as a multiply-high, an add and a shift
// (Granlund and Montgomery's method, for any numerator below 2^63), with the constants the
// launch computed (cuda_backend.cpp): what a division by a constant compiles to.
struct coil_divider { i64 d; u64 m; unsigned int s; };
__device__ __forceinline__ i64 coil_udiv(i64 n, const coil_divider& v) {
  return (i64)((__umul64hi((u64)n, v.m) + (u64)n) >> v.s);
}
template <typename T> __device__ __forceinline__ T coil_floordiv_float(T x, T y) {
  if (y == T(0)) return x / y;
  T m = fmod(x, y);
  T d = (x - m) / y;
  if (m != T(0) && ((y < T(0)) != (m < T(0)))) d -= T(1);
  if (d == T(0)) return copysign(T(0), x / y);
  T f = floor(d);
  return d - f > T(0.5) ? f + T(1) : f;
}
template <typename T> __device__ __forceinline__ T coil_remainder_float(T x, T y) {
  T m = fmod(x, y);
  if (m != T(0) && ((m < T(0)) != (y < T(0)))) m += y;
  return m;
}
// A vectorised pointwise kernel's N consecutive elements, read or written in one access.
template <typename T, int N> struct alignas(sizeof(T) * N) coil_vec { T v[N]; };
template <int N, typename T> __device__ __forceinline__ bool coil_vec_aligned(const T* p) {
  return reinterpret_cast<u64>(p) % (sizeof(T) * N) == 0;
}
// GPUs compute with subnormal numbers at full speed: softmax's exponentials need no scaling.
__device__ __forceinline__ float coil_softmax_exp(float s) { return expf(s); }
__device__ __forceinline__ float coil_softmax_div(float e, float sum) { return e / sum; }
__device__ __forceinline__ float coil_h2f(unsigned short h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ unsigned short coil_f2h(float f) {
  unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
__device__ __forceinline__ float coil_bf2f(unsigned short h) { return __int_as_float((int)h << 16); }
__device__ __forceinline__ unsigned short coil_f2bf(float f) {
  unsigned u = __float_as_uint(f);
  if (f != f) return 0x7fc0;
  return (unsigned short)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
// An indirect load's index value if it lies in [0, size); else 0, a safe address, with the
// first failure (check number + 1, value) kept in the error record the wrapper reads.
__device__ __forceinline__ i64 coil_checked_index(i64 v, i64 size, i64 check, i64* err) {
  if ((u64)v < (u64)size) return v;
  if (atomicCAS((u64*)&err[0], 0ull, (u64)(check + 1)) == 0ull) err[1] = v;
  return 0;
}
struct coil_sum { template <typename T> __device__ T operator()(T a, T b) const { return a + b; } };
struct coil_prod { template <typename T> __device__ T operator()(T a, T b) const { return a * b; } };
struct coil_max { template <typename T> __device__ T operator()(T a, T b) const { return smax(a, b); } };
struct coil_min { template <typename T> __device__ T operator()(T a, T b) const { return smin(a, b); } };
struct coil_or { __device__ bool operator()(bool a, bool b) const { return a || b; } };
struct coil_and { __device__ bool operator()(bool a, bool b) const { return a && b; } };
template <typename T, typename F> __device__ __forceinline__ T coil_warp_reduce(T v, F f) {
  for (int o = 16; o > 0; o >>= 1) v = f(v, __shfl_down_sync(COIL_FULL_MASK, v, o));
  return v;
}
// A warp's value in every lane: each exchange pairs the same two partials in both lanes, so
// every lane folds the same tree.
template <typename T, typename F> __device__ __forceinline__ T coil_warp_all_reduce(T v, F f) {
  for (int o = 16; o > 0; o >>= 1) v = f(v, __shfl_xor_sync(COIL_FULL_MASK, v, o));
  return v;
}
// The fold over the N threads of a row (N a multiple of 32; the block's rows are N threads
// apart) in every one of them: each warp's value in part (blockDim.x / 32 slots that serve
// this reduction alone, so one barrier), then every thread folds its row's warps in order.
template <int N, typename T, typename F> __device__ __forceinline__ T coil_group_all_reduce(T v, F f, T* part) {
  v = coil_warp_all_reduce(v, f);
  if (N == 32) return v;
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
  __syncthreads();
  const T* mine = part + (threadIdx.x / N) * (N / 32);
  T r = mine[0];
  #pragma unroll
  for (int w = 1; w < N / 32; ++w) r = f(r, mine[w]);
  return r;
}
template <typename T, typename F> __device__ T coil_block_reduce(T v, F f, T identity, void* smem) {
  T* part = (T*)smem;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = coil_warp_reduce(v, f);
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    T w = lane < warps ? part[lane] : identity;
    w = coil_warp_reduce(w, f);
    if (lane == 0) part[32] = w;
  }
  __syncthreads();
  T r = part[32];
  __syncthreads();
  return r;
}
// A column kernel's block is 32 columns (threadIdx.x % 32) by parts (threadIdx.x / 32), each
// part having folded every parts-th element of its column: the column's value, in every thread
// of the column. smem holds blockDim.x values.
template <typename T, typename F> __device__ T coil_column_reduce(T v, F f, void* smem) {
  T* s = (T*)smem;
  const int lane = threadIdx.x & 31, parts = blockDim.x >> 5;
  s[threadIdx.x] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    for (int p = 1; p < parts; ++p) v = f(v, s[p * 32 + lane]);
    s[lane] = v;
  }
  __syncthreads();
  v = s[lane];
  __syncthreads();
  return v;
}
template <typename F> __device__ bool coil_block_reduce(bool v, F f, bool identity, void* smem) {
  return coil_block_reduce((int)v, [f](int a, int b) { return (int)f((bool)a, (bool)b); },
                           (int)identity, smem);
}
// argmax / argmin over a block: the first index of the extreme value, NaN counting as the
// extreme (as eager's and the CPU kernels').
template <bool kMax, typename T> struct coil_arg {
  T v; i64 i;
  __device__ bool better(T a, i64 ia, T b, i64 ib) const {
    if (a != a) return b == b || ia < ib;
    if (b != b) return false;
    if (a == b) return ia < ib;
    return kMax ? a > b : a < b;
  }
};
template <bool kMax, typename T> __device__ void coil_block_arg(T& v, i64& i, void* smem) {
  T* vs = (T*)smem;
  i64* is = (i64*)((char*)smem + 33 * sizeof(double));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  coil_arg<kMax, T> c{};
  for (int o = 16; o > 0; o >>= 1) {
    T ov = __shfl_down_sync(COIL_FULL_MASK, v, o);
    i64 oi = __shfl_down_sync(COIL_FULL_MASK, i, o);
    if (c.better(ov, oi, v, i)) { v = ov; i = oi; }
  }
  if (lane == 0) { vs[warp] = v; is[warp] = i; }
  __syncthreads();
  if (warp == 0) {
    T w = lane < warps ? vs[lane] : vs[0];
    i64 wi = lane < warps ? is[lane] : is[0];
    for (int o = 16; o > 0; o >>= 1) {
      T ov = __shfl_down_sync(COIL_FULL_MASK, w, o);
      i64 oi = __shfl_down_sync(COIL_FULL_MASK, wi, o);
      if (c.better(ov, oi, w, wi)) { w = ov; wi = oi; }
    }
    if (lane == 0) { vs[32] = w; is[32] = wi; }
  }
  __syncthreads();
  v = vs[32];
  i = is[32];
  __syncthreads();
}
