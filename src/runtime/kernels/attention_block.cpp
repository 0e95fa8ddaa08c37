// The vector helpers are inlined into the AVX-512 functions; GCC still warns about the
// templates' vector arguments.
#pragma GCC diagnostic ignored "-Wpsabi"

#include "runtime/kernels/attention_block.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <memory>

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

#define COIL_AVX512 __attribute__((target("avx512f"), always_inline)) inline

COIL_AVX512 __m512i lane_index() {  // 0, 1, ..., 15
  return _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
}

COIL_AVX512 __mmask16 first_lanes(int64_t count) {
  return count >= 16 ? __mmask16(0xffff) : count <= 0 ? __mmask16(0) : __mmask16((1u << count) - 1);
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
COIL_AVX512 void pack_queries(const AttentionBlock& b, int64_t np, int64_t ld, float* qt) {
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
          r[i] = _mm512_maskz_loadu_ps(i0 + i < b.n ? cols : 0, b.q + (i0 + i) * b.q_row + p0);
        transpose16(r);
        for (int64_t p = 0; p < std::min<int64_t>(16, b.e - p0); ++p)
          _mm512_storeu_ps(qt + (p0 + p) * ld + i0, _mm512_mul_ps(r[p], scale));
      }
    return;
  }
  // Gathers address lanes by 32-bit offsets; a larger stride takes the scalar loop.
  if (b.q_row <= std::numeric_limits<int32_t>::max() / 16) {
    const __m512i rows =
        _mm512_mullo_epi32(lane_index(), _mm512_set1_epi32(static_cast<int32_t>(b.q_row)));
    for (int64_t i0 = 0; i0 < np; i0 += 16) {
      const __mmask16 m = first_lanes(b.n - i0);
      const float* q = m ? b.q + i0 * b.q_row : b.q;
      for (int64_t p = 0; p < b.e; ++p)
        _mm512_storeu_ps(
            qt + p * ld + i0,
            _mm512_mul_ps(
                _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, rows, q + p * b.q_col, 4), scale));
    }
    return;
  }
  for (int64_t p = 0; p < b.e; ++p)
    for (int64_t i = 0; i < np; ++i)
      qt[p * ld + i] = i < b.n ? b.q[i * b.q_row + p * b.q_col] * b.scale : 0.0f;
}

// st rows j0 .. j0+MR, columns i0 .. i0+32: k[j] . qt[., i], -inf past the causal limit;
// m0 and m1 keep the two vectors' running maxima.
template <int MR>
COIL_AVX512 void scores_tile(const AttentionBlock& b, const float* qt, int64_t ld, float* st,
                             int64_t j0, int64_t i0, __m512& m0, __m512& m1) {
  __m512 acc[MR][2];
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  const float* k = b.k + j0 * b.k_row;
  for (int64_t p = 0; p < b.e; ++p) {
    const __m512 q0 = _mm512_loadu_ps(qt + p * ld + i0),
                 q1 = _mm512_loadu_ps(qt + p * ld + i0 + 16);
    for (int r = 0; r < MR; ++r) {
      const __m512 kv = _mm512_set1_ps(k[r * b.k_row + p * b.k_col]);
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

// st rows j0 .. j0+MR for every query, and the columns' running maxima mx: the band's rows of k
// come from memory once, then from L1 for each tile of queries (qt stays in L1 throughout).
// With the queries' tiles outside, each tile read all of k again, and the whole call was
// slower (bench/probes/attention_block_ab.cpp measures it; measured: docs/performance.md).
template <int MR>
COIL_AVX512 void scores_band(const AttentionBlock& b, const float* qt, int64_t np, int64_t ld,
                             float* st, float* mx, int64_t j0) {
  for (int64_t i0 = 0; i0 < np; i0 += kTile) {
    __m512 m0 = _mm512_loadu_ps(mx + i0), m1 = _mm512_loadu_ps(mx + i0 + 16);
    scores_tile<MR>(b, qt, ld, st, j0, i0, m0, m1);
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
COIL_AVX512 void exps(const AttentionBlock& b, int64_t np, int64_t ld, float* st, const float* mx,
                      float* inv) {
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

// Output rows i0 .. i0+MR, columns c0 .. c0 + 16*C (the last vector's lanes by `tail`), over
// keys j0 .. j1: the sum over those keys j of st[j][i] v[j][c], added to the rows' sums so far
// (none before the first keys), and times inv[i] after the last. Past a causal row's limit
// the weights are 0, so the keys stop at the tile's last row's.
template <int MR, int C>
COIL_AVX512 void output_tile(const AttentionBlock& b, const float* st, int64_t ld, const float* inv,
                             int64_t i0, int64_t c0, __mmask16 tail, int64_t j0, int64_t j1) {
  const bool first = j0 == 0, last = j1 >= b.s;
  const int64_t keys = std::min(j1, b.causal ? b.first_row + i0 + MR : b.s);
  if (!first && !last && keys <= j0) return;
  __m512 acc[MR][C];
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < C; ++c)
      acc[r][c] = first ? _mm512_setzero_ps()
                        : _mm512_maskz_loadu_ps(c < C - 1 ? __mmask16(0xffff) : tail,
                                                b.out + (i0 + r) * b.out_row + c0 + 16 * c);
  for (int64_t j = j0; j < keys; ++j) {
    const float* v = b.v + j * b.v_row + c0;
    __m512 vv[C];
    for (int c = 0; c < C; ++c)
      vv[c] = c < C - 1 ? _mm512_loadu_ps(v + 16 * c) : _mm512_maskz_loadu_ps(tail, v + 16 * c);
    for (int r = 0; r < MR; ++r) {
      const __m512 w = _mm512_set1_ps(st[j * ld + i0 + r]);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(w, vv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    float* o = b.out + (i0 + r) * b.out_row + c0;
    const __m512 f = _mm512_set1_ps(last ? inv[i0 + r] : 1.0f);
    for (int c = 0; c < C; ++c) {
      const __m512 x = _mm512_mul_ps(acc[r][c], f);
      if (c < C - 1)
        _mm512_storeu_ps(o + 16 * c, x);
      else
        _mm512_mask_storeu_ps(o + 16 * c, tail, x);
    }
  }
}

// Every output row for columns c0 .. c0 + 16*C, a chunk of kKeyChunk keys at a time: tiles of
// MR rows, then single rows. A chunk's rows of v (16 KB at most) stay in L1 for every tile,
// where a tile over all the keys read all of v from L2 again (1.4 MB a block of 128 rows). The
// trade-off depends on the CPU: of the two measured, chunking made this product take fewer
// cycles on one and slightly more on the other (bench/probes/attention_block_ab.cpp measures
// it; measured: docs/performance.md).
// MR * C accumulators stay within the 32 registers with the C values and a weight.
constexpr int64_t kKeyChunk = 64;
template <int C>
COIL_AVX512 void output_columns(const AttentionBlock& b, const float* st, int64_t ld,
                                const float* inv, int64_t c0, __mmask16 tail) {
  constexpr int MR = C >= 3 ? 6 : C == 2 ? 8 : 12;
  for (int64_t j0 = 0; j0 < b.s; j0 += kKeyChunk) {
    const int64_t j1 = std::min(j0 + kKeyChunk, b.s);
    int64_t i0 = 0;
    for (; i0 + MR <= b.n; i0 += MR) output_tile<MR, C>(b, st, ld, inv, i0, c0, tail, j0, j1);
    for (; i0 < b.n; ++i0) output_tile<1, C>(b, st, ld, inv, i0, c0, tail, j0, j1);
  }
}

__attribute__((target("avx512f"))) void attention_block_avx512(const AttentionBlock& b,
                                                               float* scratch) {
  const int64_t np = padded(b.n), ld = row_stride(np);
  float *qt = scratch, *st = qt + b.e * ld, *mx = st + b.s * ld, *inv = mx + np;
  pack_queries(b, np, ld, qt);
  for (int64_t i0 = 0; i0 < np; i0 += 16)
    _mm512_storeu_ps(mx + i0, _mm512_set1_ps(-std::numeric_limits<float>::infinity()));
  int64_t j0 = 0;
  for (; j0 + 12 <= b.s; j0 += 12) scores_band<12>(b, qt, np, ld, st, mx, j0);
  for (; j0 + 4 <= b.s; j0 += 4) scores_band<4>(b, qt, np, ld, st, mx, j0);
  for (; j0 < b.s; ++j0) scores_band<1>(b, qt, np, ld, st, mx, j0);
  exps(b, np, ld, st, mx, inv);
  for (int64_t c0 = 0; c0 < b.ev; c0 += 64) {
    const int64_t width = std::min<int64_t>(64, b.ev - c0), vectors = (width + 15) / 16;
    const __mmask16 tail = first_lanes(width - 16 * (vectors - 1));
    switch (vectors) {
      case 4:
        output_columns<4>(b, st, ld, inv, c0, tail);
        break;
      case 3:
        output_columns<3>(b, st, ld, inv, c0, tail);
        break;
      case 2:
        output_columns<2>(b, st, ld, inv, c0, tail);
        break;
      default:
        output_columns<1>(b, st, ld, inv, c0, tail);
        break;
    }
  }
}

#undef COIL_AVX512

}  // namespace

bool attention_block_available() {
  static const bool avx512 = [] {  // asked once, not per call
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return avx512;
}

bool attention_block(const AttentionBlock& b) {
  // The calling thread's scratch, grown as blocks need and kept: the same lines, in that
  // core's cache, serve the thread's next block and next call.
  struct Scratch {
    std::unique_ptr<float, decltype(&std::free)> p{nullptr, &std::free};
    int64_t size = 0;
  };
  thread_local Scratch pad;
  const int64_t need = (b.e + b.s) * row_stride(padded(b.n)) + 2 * padded(b.n);
  if (need > pad.size) {
    const size_t bytes = (static_cast<size_t>(need) * sizeof(float) + 63) / 64 * 64;
    pad.p.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    pad.size = pad.p ? need : 0;
    if (!pad.p) return false;
  }
  attention_block_avx512(b, pad.p.get());
  return true;
}

}  // namespace coil
