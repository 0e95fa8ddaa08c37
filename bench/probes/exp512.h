// The probes' AVX-512 exp: coil's generated-code exp (codegen/cpp_prelude.cpp), 2 ulp, as
// intrinsics. e^x = p * 2^n with |x| clamped to [-150, 88].
#pragma once
#include <immintrin.h>
#include <math.h>

static inline __m512 exp512_parts(__m512 x, __m512* n_out) {
  x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.0f)), _mm512_set1_ps(-150.0f));
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269502f)), 0);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194442e-04f), r);
  __m512 q = _mm512_set1_ps(0.001392617612f);
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(0.008363173075f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(0.04166655466f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(0.1666657703f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(0.5f));
  *n_out = n;
  return _mm512_fmadd_ps(_mm512_mul_ps(r, r), q, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
}

static inline __m512 exp512(__m512 x) {
  __m512 n, p = exp512_parts(x, &n);
  return _mm512_scalef_ps(p, n);
}

// e[j] = exp(x[j] - max(x)) over a row of n floats (n a multiple of 16); returns their sum.
static inline float exp_shifted_row512(const float* x, float* e, int n) {
  __m512 m = _mm512_set1_ps(-INFINITY);
  for (int j = 0; j < n; j += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(x + j));
  __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(m)), s = _mm512_setzero_ps();
  for (int j = 0; j < n; j += 16) {
    __m512 v = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + j), mx));
    _mm512_storeu_ps(e + j, v);
    s = _mm512_add_ps(s, v);
  }
  return _mm512_reduce_add_ps(s);
}
