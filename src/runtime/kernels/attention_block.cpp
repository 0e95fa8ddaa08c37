// The vector helpers are inlined into the AVX-512 functions; GCC still warns about the
// templates' vector arguments.
#pragma GCC diagnostic ignored "-Wpsabi"

#include "runtime/kernels/attention_block.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <memory>
#include <type_traits>

#include "runtime/kernels/exp_poly.h"

// The block is computed transposed: st = k @ (q * scale)^T, keys by queries, so that a vector
// holds 16 queries' scores for one key. The softmax's maximum and sum then run down the
// columns, one vector operation per 16 scores with no horizontal reduction, and the second
// product o = p @ v reads each query's weight for key j as a broadcast from st's row j. The
// weights stay unnormalised (e^(s - max)); each output row is scaled by 1 / sum at the end, a
// multiply per output element instead of a division per score.
//
// Scratch: qt (e rows, the scaled queries transposed), st (s rows), each row np floats and a
// line more apart (row_stride), then the columns' maxima and the rows' 1 / sum (np each);
// np = n rounded up to whole tiles of 32 queries, the padding queries zeros, computed along
// and never written out.
//
// 16-bit elements are widened to float32 in registers as they are loaded: the queries as they
// are packed, each band of keys into a small float copy (kb) read by every tile of queries, and
// each chunk of values into another (vb) read by every tile of output rows. The output's
// running sums stay float32 in scratch (ob, a column group of 64 at a time) and are rounded
// once, when the group is stored. A copy of the whole of q, k and v in float32 before the call
// took a third of the time of the whole op (measured: docs/performance.md).

namespace coil {

namespace {

constexpr int64_t kTile = 32;  // queries per tile of the first product: two vectors

int64_t padded(int64_t n) { return (n + kTile - 1) / kTile * kTile; }

// The rows of qt and st are np floats and one cache line more apart. np floats are a whole
// number of 128-byte line pairs (512 bytes for 128 queries), and a column of rows that far
// apart falls in a fraction of L1's sets (an eighth at 128 queries), too few to keep the 64
// rows of qt that each scores tile reads, or the 256 rows of st that each output tile reads,
// from one tile to the next. The extra line spreads them over all the sets: a block's time
// became steadier and slightly shorter (bench/probes/attention_block_ab.cpp measures it;
// measured: docs/performance.md).
int64_t row_stride(int64_t np) { return np + 16; }

#define COIL_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,f16c"), always_inline)) inline

COIL_AVX512 __m512i lane_index() {  // 0, 1, ..., 15
  return _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
}

COIL_AVX512 __mmask16 first_lanes(int64_t count) {
  return count >= 16 ? __mmask16(0xffff) : count <= 0 ? __mmask16(0) : __mmask16((1u << count) - 1);
}

// Up to 16 elements (the lanes of m) widened to floats; the others 0. (The zero-masking forms
// throughout: the intrinsics' undefined pass-through trips -Wmaybe-uninitialized in GCC 12.)
template <typename T>
COIL_AVX512 __m512 load_floats(const T* p, __mmask16 m) {
  if constexpr (std::is_same_v<T, float>) {
    return _mm512_maskz_loadu_ps(m, p);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(m, p);
    if constexpr (std::is_same_v<T, BFloat16>)
      return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(m, _mm512_maskz_cvtepu16_epi32(m, h), 16));
    else
      return _mm512_maskz_cvtph_ps(m, h);
  }
}

// The lanes of m of x stored as T, rounded to nearest even (bfloat16 as BFloat16's constructor
// rounds: subnormals kept, any NaN the quiet 0x7fc0).
template <typename T>
COIL_AVX512 void store_floats(T* p, __mmask16 m, __m512 x) {
  if constexpr (std::is_same_v<T, float>) {
    _mm512_mask_storeu_ps(p, m, x);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    const __m512i u = _mm512_castps_si512(x);
    const __m512i odd = _mm512_and_si512(_mm512_maskz_srli_epi32(m, u, 16), _mm512_set1_epi32(1));
    const __m512i up = _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
    const __m512i r =
        _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q),
                                _mm512_maskz_srli_epi32(m, up, 16), _mm512_set1_epi32(0x7fc0));
    _mm256_mask_storeu_epi16(p, m, _mm512_maskz_cvtepi32_epi16(m, r));
  } else {
    _mm256_mask_storeu_epi16(
        p, m, _mm512_maskz_cvtps_ph(m, x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
}

template <typename T>
COIL_AVX512 float to_float(T x) {
  if constexpr (std::is_same_v<T, Half>)
    return _cvtsh_ss(x.bits);
  else
    return static_cast<float>(x);
}

// 128-bit lanes 0 and 2 of a, then of b; and lanes 1 and 3. (Functions of the AVX-512 target,
// not lambdas: a lambda is compiled for the default target, and unoptimised builds call it
// with its vector arguments where it does not look for them.)
COIL_AVX512 __m512 even_lanes(__m512 a, __m512 b) {
  return __builtin_shufflevector(a, b, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
}
COIL_AVX512 __m512 odd_lanes(__m512 a, __m512 b) {
  return __builtin_shufflevector(a, b, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
}

// The 16 x 16 floats of rows r[0..15] transposed in place: four rounds of 16 shuffles (GCC's
// shuffles, as the intrinsics' undefined pass-through trips -Wmaybe-uninitialized in GCC 12).
COIL_AVX512 void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 16; i += 2) {  // lane l: r[i][4l], r[i+1][4l], r[i][4l+1], r[i+1][4l+1] ...
    t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28,
                                   13, 29);
    t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27,
                                       14, 30, 15, 31);
  }
  for (int i = 0; i < 16; i += 4)  // u[i + k], lane l: column 4l + k of rows i .. i+3
    for (int h = 0; h < 2; ++h) {
      const __m512 a = t[i + h], b = t[i + h + 2];
      u[i + 2 * h] =
          __builtin_shufflevector(a, b, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
      u[i + 2 * h + 1] =
          __builtin_shufflevector(a, b, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
    }
  for (int k = 0; k < 4; ++k) {  // columns k, 4 + k, 8 + k and 12 + k gather their four lanes
    const __m512 v0 = even_lanes(u[k], u[4 + k]), v1 = odd_lanes(u[k], u[4 + k]),
                 w0 = even_lanes(u[8 + k], u[12 + k]), w1 = odd_lanes(u[8 + k], u[12 + k]);
    r[k] = even_lanes(v0, w0);
    r[4 + k] = even_lanes(v1, w1);
    r[8 + k] = odd_lanes(v0, w0);
    r[12 + k] = odd_lanes(v1, w1);
  }
}

// qt[p][i] = q[i][p] * scale for i < n, 0 for the padding.
template <typename T>
COIL_AVX512 void pack_queries(const AttentionBlock<T>& b, int64_t np, int64_t ld, float* qt) {
  const __m512 scale = _mm512_set1_ps(b.scale);
  // Rows of unit stride: squares of 16 rows by 16 features, loaded along the rows and
  // transposed in registers (a gather per vector cost a visible share of a block's time;
  // measured: docs/performance.md).
  if (b.q_col == 1) {
    __m512 r[16];
    for (int64_t i0 = 0; i0 < np; i0 += 16)
      for (int64_t p0 = 0; p0 < b.e; p0 += 16) {
        const __mmask16 cols = first_lanes(b.e - p0);
        for (int i = 0; i < 16; ++i)
          r[i] = load_floats(b.q + (i0 + i) * b.q_row + p0, i0 + i < b.n ? cols : 0);
        transpose16(r);
        for (int64_t p = 0; p < std::min<int64_t>(16, b.e - p0); ++p)
          _mm512_storeu_ps(qt + (p0 + p) * ld + i0, _mm512_mul_ps(r[p], scale));
      }
    return;
  }
  // Gathers address lanes by 32-bit offsets; a larger stride, or 16-bit elements, take the
  // scalar loop.
  if constexpr (std::is_same_v<T, float>) {
    if (b.q_row <= std::numeric_limits<int32_t>::max() / 16) {
      const __m512i rows =
          _mm512_mullo_epi32(lane_index(), _mm512_set1_epi32(static_cast<int32_t>(b.q_row)));
      for (int64_t i0 = 0; i0 < np; i0 += 16) {
        const __mmask16 m = first_lanes(b.n - i0);
        const float* q = m ? b.q + i0 * b.q_row : b.q;
        for (int64_t p = 0; p < b.e; ++p)
          _mm512_storeu_ps(qt + p * ld + i0,
                           _mm512_mul_ps(_mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, rows,
                                                                  q + p * b.q_col, 4),
                                         scale));
      }
      return;
    }
  }
  for (int64_t p = 0; p < b.e; ++p)
    for (int64_t i = 0; i < np; ++i)
      qt[p * ld + i] = i < b.n ? to_float(b.q[i * b.q_row + p * b.q_col]) * b.scale : 0.0f;
}

// Rows of keys as floats: key r's feature p at at[r * row + p * col].
struct FloatRows {
  const float* at;
  int64_t row, col;
};

// st rows j0 .. j0+MR, columns i0 .. i0+32: k[j] . qt[., i], -inf past the causal limit;
// m0 and m1 keep the two vectors' running maxima. k holds rows j0 .. j0+MR.
template <int MR, typename T>
COIL_AVX512 void scores_tile(const AttentionBlock<T>& b, FloatRows k, const float* qt, int64_t ld,
                             float* st, int64_t j0, int64_t i0, __m512& m0, __m512& m1) {
  __m512 acc[MR][2];
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < b.e; ++p) {
    const __m512 q0 = _mm512_loadu_ps(qt + p * ld + i0),
                 q1 = _mm512_loadu_ps(qt + p * ld + i0 + 16);
    for (int r = 0; r < MR; ++r) {
      const __m512 kv = _mm512_set1_ps(k.at[r * k.row + p * k.col]);
      acc[r][0] = _mm512_fmadd_ps(kv, q0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(kv, q1, acc[r][1]);
    }
  }
  // Query i (row first_row + i) sees key j when j <= first_row + i: lane l of the tile's
  // first vector when l >= j - first_row - i0.
  const bool masks = b.causal && j0 + MR - 1 > b.first_row + i0;
  const __m512i lane = lane_index();
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int r = 0; r < MR; ++r) {
    if (masks) {
      const int64_t from = std::clamp<int64_t>(j0 + r - b.first_row - i0, 0, 2 * 16);
      const __m512i lo = _mm512_set1_epi32(static_cast<int32_t>(from));
      const __m512i hi = _mm512_set1_epi32(static_cast<int32_t>(from - 16));
      acc[r][0] = _mm512_mask_blend_ps(_mm512_cmpge_epi32_mask(lane, lo), neg_inf, acc[r][0]);
      acc[r][1] = _mm512_mask_blend_ps(_mm512_cmpge_epi32_mask(lane, hi), neg_inf, acc[r][1]);
    }
    _mm512_storeu_ps(st + (j0 + r) * ld + i0, acc[r][0]);
    _mm512_storeu_ps(st + (j0 + r) * ld + i0 + 16, acc[r][1]);
    // (GCC 12's _mm512_max_ps trips -Wmaybe-uninitialized.) A NaN score may or may not stay
    // in the maximum; its own exp is NaN either way.
    m0 = acc[r][0] > m0 ? acc[r][0] : m0;
    m1 = acc[r][1] > m1 ? acc[r][1] : m1;
  }
}

// Rows r0 .. r0+count of x (elements at x[r * row + c * col], c < width) widened into
// out[(r - r0) * out_row + c].
template <typename T>
COIL_AVX512 void widen_rows(const T* x, int64_t row, int64_t col, int64_t r0, int64_t count,
                            int64_t width, float* out, int64_t out_row) {
  for (int64_t r = 0; r < count; ++r) {
    const T* from = x + (r0 + r) * row;
    float* to = out + r * out_row;
    if (col == 1) {
      for (int64_t c = 0; c < width; c += 16) {
        const __mmask16 m = first_lanes(width - c);
        _mm512_mask_storeu_ps(to + c, m, load_floats(from + c, m));
      }
    } else {
      for (int64_t c = 0; c < width; ++c) to[c] = to_float(from[c * col]);
    }
  }
}

// st rows j0 .. j0+MR for every query, and the columns' running maxima mx: the band's rows of k
// come from memory once, then from L1 for each tile of queries (qt stays in L1 throughout).
// With the queries' tiles outside, each tile read all of k again, and the whole call was
// slower (bench/probes/attention_block_ab.cpp measures it; measured: docs/performance.md).
// 16-bit keys are widened into kb (MR rows of e floats) first.
template <int MR, typename T>
COIL_AVX512 void scores_band(const AttentionBlock<T>& b, const float* qt, int64_t np, int64_t ld,
                             float* st, float* mx, float* kb, int64_t j0) {
  FloatRows k{nullptr, b.k_row, b.k_col};
  if constexpr (std::is_same_v<T, float>) {
    k.at = b.k + j0 * b.k_row;
  } else {
    widen_rows(b.k, b.k_row, b.k_col, j0, MR, b.e, kb, b.e);
    k = {kb, b.e, 1};
  }
  for (int64_t i0 = 0; i0 < np; i0 += kTile) {
    __m512 m0 = _mm512_loadu_ps(mx + i0), m1 = _mm512_loadu_ps(mx + i0 + 16);
    scores_tile<MR>(b, k, qt, ld, st, j0, i0, m0, m1);
    _mm512_storeu_ps(mx + i0, m0);
    _mm512_storeu_ps(mx + i0 + 16, m1);
  }
}

// e^d for d = score - max <= 0, 0 below e^-87 (where e^d would come near FLT_MIN), NaN for NaN.
// p * 2^nf in one instruction (vscalefps), whose zero-masking also gives the 0s: the lanes
// below -87 need no clamping first, whatever their p and nf. 15 vector operations a vector
// with the subtraction and the sum, against 20 with the exponent built in integer bits.
COIL_AVX512 __m512 exp_flushed(__m512 d) {
  const __mmask16 kept = _mm512_cmp_ps_mask(d, _mm512_set1_ps(-87.0f), _CMP_NLT_UQ);  // or NaN
  __m512 nf, p = exp_parts(d, nf);
  return _mm512_maskz_scalef_ps(kept, p, nf);
}

// st = e^(st - max) in place, down each column of 16 queries, and inv = 1 / the column's sum;
// 0 for a column of -inf alone (its exps are all 0), NaN for a NaN sum.
template <typename T>
COIL_AVX512 void exps(const AttentionBlock<T>& b, int64_t np, int64_t ld, float* st,
                      const float* mx, float* inv) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t i0 = 0; i0 < np; i0 += 16) {
    __m512 m = _mm512_loadu_ps(mx + i0);
    m = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(m, neg_inf, _CMP_EQ_OQ), m, _mm512_setzero_ps());
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    int64_t j = 0;
    for (; j + 2 <= b.s; j += 2) {
      const __m512 e0 = exp_flushed(_mm512_sub_ps(_mm512_loadu_ps(st + j * ld + i0), m));
      const __m512 e1 = exp_flushed(_mm512_sub_ps(_mm512_loadu_ps(st + (j + 1) * ld + i0), m));
      _mm512_storeu_ps(st + j * ld + i0, e0);
      _mm512_storeu_ps(st + (j + 1) * ld + i0, e1);
      s0 = _mm512_add_ps(s0, e0);
      s1 = _mm512_add_ps(s1, e1);
    }
    if (j < b.s) {
      const __m512 e0 = exp_flushed(_mm512_sub_ps(_mm512_loadu_ps(st + j * ld + i0), m));
      _mm512_storeu_ps(st + j * ld + i0, e0);
      s0 = _mm512_add_ps(s0, e0);
    }
    const __m512 sum = _mm512_add_ps(s0, s1);
    _mm512_storeu_ps(inv + i0, _mm512_mask_blend_ps(
                                   _mm512_cmp_ps_mask(sum, _mm512_setzero_ps(), _CMP_EQ_OQ),
                                   _mm512_div_ps(_mm512_set1_ps(1.0f), sum), _mm512_setzero_ps()));
  }
}

// Output rows i0 .. i0+MR, 16*C columns (the last vector's lanes by `tail`), over keys j0 .. j1:
// the sum over those keys j of st[j][i] v[j][.], added to the rows' sums so far in o (none
// before the first keys), and times inv[i] after the last. v holds rows j0 .. j1 (features
// contiguous). Past a causal row's limit the weights are 0, so the keys stop at the tile's last
// row's.
template <int MR, int C, typename T>
COIL_AVX512 void output_tile(const AttentionBlock<T>& b, const float* st, int64_t ld,
                             const float* inv, FloatRows v, float* o, int64_t o_row, int64_t i0,
                             __mmask16 tail, int64_t j0, int64_t j1) {
  const bool first = j0 == 0, last = j1 >= b.s;
  const int64_t keys = std::min(j1, b.causal ? b.first_row + i0 + MR : b.s);
  if (!first && !last && keys <= j0) return;
  __m512 acc[MR][C];
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < C; ++c)
      acc[r][c] = first ? _mm512_setzero_ps()
                        : _mm512_maskz_loadu_ps(c < C - 1 ? __mmask16(0xffff) : tail,
                                                o + (i0 + r) * o_row + 16 * c);
  for (int64_t j = j0; j < keys; ++j) {
    const float* vj = v.at + (j - j0) * v.row;
    __m512 vv[C];
    for (int c = 0; c < C; ++c)
      vv[c] = c < C - 1 ? _mm512_loadu_ps(vj + 16 * c) : _mm512_maskz_loadu_ps(tail, vj + 16 * c);
    for (int r = 0; r < MR; ++r) {
      const __m512 w = _mm512_set1_ps(st[j * ld + i0 + r]);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(w, vv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    float* out = o + (i0 + r) * o_row;
    const __m512 f = _mm512_set1_ps(last ? inv[i0 + r] : 1.0f);
    for (int c = 0; c < C; ++c)
      _mm512_mask_storeu_ps(out + 16 * c, c < C - 1 ? __mmask16(0xffff) : tail,
                            _mm512_mul_ps(acc[r][c], f));
  }
}

// Every output row for columns c0 .. c0 + 16*C, a chunk of kKeyChunk keys at a time: tiles of
// MR rows, then single rows. A chunk's rows of v (16 KB at most) stay in L1 for every tile,
// where a tile over all the keys read all of v from L2 again (1.4 MB a block of 128 rows). The
// trade-off depends on the CPU: of the two measured, chunking made this product take fewer
// cycles on one and slightly more on the other (bench/probes/attention_block_ab.cpp measures
// it; measured: docs/performance.md).
// MR * C accumulators stay within the 32 registers with the C values and a weight.
// 16-bit values are widened a chunk at a time into vb, and the sums kept in ob until the
// group's rows are stored.
constexpr int64_t kKeyChunk = 64, kGroup = 64;
template <int C, typename T>
COIL_AVX512 void output_columns(const AttentionBlock<T>& b, const float* st, int64_t ld,
                                const float* inv, int64_t c0, __mmask16 tail, float* vb,
                                float* ob) {
  constexpr int MR = C >= 3 ? 6 : C == 2 ? 8 : 12;
  constexpr bool wide = std::is_same_v<T, float>;
  const int64_t width = std::min(kGroup, b.ev - c0);
  float* o = ob;
  int64_t o_row = kGroup;
  if constexpr (wide) o = b.out + c0, o_row = b.out_row;
  for (int64_t j0 = 0; j0 < b.s; j0 += kKeyChunk) {
    const int64_t j1 = std::min(j0 + kKeyChunk, b.s);
    FloatRows v{nullptr, kGroup, 1};
    if constexpr (wide) {
      v = {b.v + j0 * b.v_row + c0, b.v_row, 1};
    } else {
      widen_rows(b.v + c0, b.v_row, 1, j0, j1 - j0, width, vb, kGroup);
      v.at = vb;
    }
    int64_t i0 = 0;
    for (; i0 + MR <= b.n; i0 += MR)
      output_tile<MR, C>(b, st, ld, inv, v, o, o_row, i0, tail, j0, j1);
    for (; i0 < b.n; ++i0) output_tile<1, C>(b, st, ld, inv, v, o, o_row, i0, tail, j0, j1);
  }
  if constexpr (!wide)
    for (int64_t i = 0; i < b.n; ++i)
      for (int64_t c = 0; c < width; c += 16)
        store_floats(b.out + i * b.out_row + c0 + c, first_lanes(width - c),
                     _mm512_loadu_ps(ob + i * kGroup + c));
}

// The scratch a block takes, in floats: qt, st, the maxima and 1 / sums; for 16-bit elements
// also kb (a band of 12 keys), vb (a chunk of values) and ob (a column group of the output).
constexpr int64_t kBand = 12;
template <typename T>
int64_t scratch_floats(const AttentionBlock<T>& b) {
  const int64_t np = padded(b.n), floats = (b.e + b.s) * row_stride(np) + 2 * np;
  if (std::is_same_v<T, float>) return floats;
  return floats + kBand * b.e + kKeyChunk * kGroup + np * kGroup;
}

template <typename T>
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"))) void attention_block_avx512(
    const AttentionBlock<T>& b, float* scratch) {
  const int64_t np = padded(b.n), ld = row_stride(np);
  float *qt = scratch, *st = qt + b.e * ld, *mx = st + b.s * ld, *inv = mx + np, *kb = inv + np,
        *vb = kb + kBand * b.e, *ob = vb + kKeyChunk * kGroup;
  pack_queries(b, np, ld, qt);
  for (int64_t i0 = 0; i0 < np; i0 += 16)
    _mm512_storeu_ps(mx + i0, _mm512_set1_ps(-std::numeric_limits<float>::infinity()));
  int64_t j0 = 0;
  for (; j0 + kBand <= b.s; j0 += kBand) scores_band<kBand>(b, qt, np, ld, st, mx, kb, j0);
  for (; j0 + 4 <= b.s; j0 += 4) scores_band<4>(b, qt, np, ld, st, mx, kb, j0);
  for (; j0 < b.s; ++j0) scores_band<1>(b, qt, np, ld, st, mx, kb, j0);
  exps(b, np, ld, st, mx, inv);
  for (int64_t c0 = 0; c0 < b.ev; c0 += kGroup) {
    const int64_t width = std::min(kGroup, b.ev - c0), vectors = (width + 15) / 16;
    const __mmask16 tail = first_lanes(width - 16 * (vectors - 1));
    switch (vectors) {
      case 4:
        output_columns<4>(b, st, ld, inv, c0, tail, vb, ob);
        break;
      case 3:
        output_columns<3>(b, st, ld, inv, c0, tail, vb, ob);
        break;
      case 2:
        output_columns<2>(b, st, ld, inv, c0, tail, vb, ob);
        break;
      default:
        output_columns<1>(b, st, ld, inv, c0, tail, vb, ob);
        break;
    }
  }
}

#undef COIL_AVX512

}  // namespace

bool attention_block_available() {
  static const bool avx512 = [] {  // asked once, not per call
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("f16c");
  }();
  return avx512;
}

namespace {

template <typename T>
bool run_block(const AttentionBlock<T>& b) {
  // The calling thread's scratch, grown as blocks need and kept: the same lines, in that
  // core's cache, serve the thread's next block and next call.
  struct Scratch {
    std::unique_ptr<float, decltype(&std::free)> p{nullptr, &std::free};
    int64_t size = 0;
  };
  thread_local Scratch pad;
  const int64_t need = scratch_floats(b);
  if (need > pad.size) {
    const size_t bytes = (static_cast<size_t>(need) * sizeof(float) + 63) / 64 * 64;
    pad.p.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    pad.size = pad.p ? need : 0;
    if (!pad.p) return false;
  }
  attention_block_avx512(b, pad.p.get());
  return true;
}

}  // namespace

bool attention_block(const AttentionBlock<float>& b) { return run_block(b); }
bool attention_block(const AttentionBlock<BFloat16>& b) { return run_block(b); }
bool attention_block(const AttentionBlock<Half>& b) { return run_block(b); }

}  // namespace coil
