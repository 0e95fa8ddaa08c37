// What do subnormal numbers cost a row softmax? Rows of a product of two randn matrices
// (512 x 512, K = 512: values of standard deviation 22.6) put about a sixth of exp(x - max)
// below FLT_MIN, and each subnormal result or operand can cost the core a microcode assist.
//   plain     coil's kernel: max; exp(x - max) kept with its sum; the kept values scaled
//   ftz       the same with flush-to-zero and denormals-are-zero set (not IEEE: a bound)
//   flush     plain, but exp's subnormal results replaced by 0 (wrong: where the time goes)
//   scaled    exp(x - max) * 2^64 kept (exact, never subnormal where the result is not 0),
//             the sum of those, and each result assembled exactly: a subnormal one from
//             its integer significand, a normal one by a power-of-two scaling
// Each variant is timed on rows of standard deviation 22.6 and of 1 (no subnormals), and
// checked against float64.
//   gcc -O3 -march=native -fopenmp bench/probes/softmax_denormals.c -o /tmp/sd -lm && /tmp/sd
#include <float.h>
#include "exp512.h"
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { R = 512, C = 512, REPS = 400 };

static void row_plain(const float* x, float* y, int flush) {
  __m512 m = _mm512_set1_ps(-INFINITY);
  for (int j = 0; j < C; j += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(x + j));
  __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(m)), s = _mm512_setzero_ps();
  for (int j = 0; j < C; j += 16) {
    __m512 n, p = exp512_parts(_mm512_sub_ps(_mm512_loadu_ps(x + j), mx), &n);
    if (flush)
      p = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(n, _mm512_set1_ps(-126.0f), _CMP_GE_OQ), p);
    __m512 e = _mm512_scalef_ps(p, n);
    _mm512_storeu_ps(y + j, e);
    s = _mm512_add_ps(s, e);
  }
  __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(s));
  for (int j = 0; j < C; j += 16)
    _mm512_storeu_ps(y + j, _mm512_mul_ps(_mm512_loadu_ps(y + j), inv));
}

static void row_scaled(const float* x, float* y) {
  __m512 m = _mm512_set1_ps(-INFINITY);
  for (int j = 0; j < C; j += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(x + j));
  __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(m)), s = _mm512_setzero_ps();
  for (int j = 0; j < C; j += 16) {
    __m512 n, p = exp512_parts(_mm512_sub_ps(_mm512_loadu_ps(x + j), mx), &n);
    // 2^64 e^x: normal down to e^x = 2^-190; below, the result (e^x / sum, sum >= 1) is 0.
    __mmask16 keep = _mm512_cmp_ps_mask(n, _mm512_set1_ps(-190.0f), _CMP_GT_OQ);
    __m512 e = _mm512_maskz_scalef_ps(keep, p, _mm512_add_ps(n, _mm512_set1_ps(64.0f)));
    _mm512_storeu_ps(y + j, e);
    s = _mm512_add_ps(s, e);
  }
  // result = e / sum = t * 2^-85 with t = e * (2^85 / sum), never past float's range (sum
  // >= 2^64). t < 2^-41 is a subnormal result, whose bits are t * 2^64 rounded to an
  // integer; else t * 2^-85 is exact. Vectors without a subnormal result skip that part.
  __m512 inv = _mm512_set1_ps(0x1p85f / _mm512_reduce_add_ps(s));
  for (int j = 0; j < C; j += 16) {
    __m512 t = _mm512_mul_ps(_mm512_loadu_ps(y + j), inv);
    __mmask16 sub = _mm512_cmp_ps_mask(t, _mm512_set1_ps(0x1p-41f), _CMP_LT_OQ);
    __m512 r = _mm512_maskz_mul_ps(~sub, t, _mm512_set1_ps(0x1p-85f));
    if (sub) {
      __m512i bits = _mm512_cvtps_epi32(_mm512_maskz_mul_ps(sub, t, _mm512_set1_ps(0x1p64f)));
      r = _mm512_mask_mov_ps(r, sub, _mm512_castsi512_ps(bits));
    }
    _mm512_storeu_ps(y + j, r);
  }
}

static float *X, *Y;
static int variant;

static void softmax(void) {
#pragma omp parallel
  {
    if (variant == 1) _mm_setcsr(_mm_getcsr() | 0x8040);  // FTZ | DAZ
#pragma omp for schedule(static)
    for (int i = 0; i < R; ++i) {
      const float* x = X + (size_t)i * C;
      float* y = Y + (size_t)i * C;
      if (variant == 3)
        row_scaled(x, y);
      else
        row_plain(x, y, variant == 2);
    }
    if (variant == 1) _mm_setcsr(_mm_getcsr() & ~0x8040u);
  }
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

// Largest error in units of the result's own last place (subnormals: 2^-149), and how many
// results are subnormal.
static void check(double* ulps, int* subnormal) {
  *ulps = 0;
  *subnormal = 0;
  for (int i = 0; i < R; ++i) {
    const float* x = X + (size_t)i * C;
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < C; ++j) mx = x[j] > mx ? x[j] : mx;
    for (int j = 0; j < C; ++j) sum += exp((double)x[j] - mx);
    for (int j = 0; j < C; ++j) {
      double want = exp((double)x[j] - mx) / sum, got = Y[(size_t)i * C + j];
      double ulp = want < FLT_MIN ? 0x1p-149 : ldexp(1.0, ilogb(want) - 23);
      double e = fabs(got - want) / ulp;
      *ulps = e > *ulps ? e : *ulps;
      *subnormal += want < FLT_MIN && want >= 0x1p-150;
    }
  }
}

int main(void) {
  X = aligned_alloc(64, sizeof(float) * R * C);
  Y = aligned_alloc(64, sizeof(float) * R * C);
  const char* names[] = {"plain", "ftz", "flush", "scaled"};
  printf("softmax_denormals %dx%d, %d threads\n", R, C, omp_get_max_threads());
  for (int wide = 1; wide >= 0; --wide) {
    srand(1);
    for (int i = 0; i < R * C; ++i) {  // Box-Muller normal of deviation 22.6 or 1
      double u = (rand() + 1.0) / (RAND_MAX + 2.0), v = rand() / (RAND_MAX + 1.0);
      X[i] = (float)((wide ? 22.6 : 1.0) * sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
    }
    for (variant = 0; variant < 4; ++variant) {
      double t[REPS];
      for (int w = 0; w < 10; ++w) softmax();
      for (int r = 0; r < REPS; ++r) {
        double t0 = omp_get_wtime();
        softmax();
        t[r] = (omp_get_wtime() - t0) * 1e3;
      }
      qsort(t, REPS, sizeof(double), cmp);
      double ulps;
      int sub;
      check(&ulps, &sub);
      printf("  deviation %4.1f  %-7s %7.4f ms  max error %.1f ulp  (%d subnormal results)\n",
             wide ? 22.6 : 1.0, names[variant], t[REPS / 2], ulps, sub);
    }
  }
  return 0;
}
