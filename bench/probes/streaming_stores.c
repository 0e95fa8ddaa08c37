// Does writing a kernel's output with streaming (non-temporal) stores pay on this machine?
// A softmax over 2048 x 2048 float32 rows (coil's shape for it: the row's maximum, then
// exp(x - max) kept in a row buffer with its sum, then the scaled row stored to the output)
// and a plain copy, each with ordinary stores and with streaming stores, over 8 rotating
// inputs (128 MB: memory, not cache) and one output (a caching allocator's reused block).
// Ordinary stores first read each output line (read-for-ownership): 1.5x the bytes.
//   gcc -O3 -march=native -fopenmp bench/probes/streaming_stores.c -o /tmp/ss && /tmp/ss
#include "exp512.h"
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { R = 2048, C = 2048, COPIES = 8, REPS = 60 };

static double now(void) { return omp_get_wtime(); }

static void softmax(const float* x, float* y, int stream) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < R; ++i) {
    const float* a = x + (size_t)i * C;
    float* b = y + (size_t)i * C;
    float tmp[C] __attribute__((aligned(64)));
    __m512 inv = _mm512_set1_ps(1.0f / exp_shifted_row512(a, tmp, C));
    if (stream) {
      for (int j = 0; j < C; j += 16)
        _mm512_stream_ps(b + j, _mm512_mul_ps(_mm512_load_ps(tmp + j), inv));
      _mm_sfence();
    } else {
      for (int j = 0; j < C; j += 16)
        _mm512_storeu_ps(b + j, _mm512_mul_ps(_mm512_load_ps(tmp + j), inv));
    }
  }
}

static void copy(const float* x, float* y, int stream) {
  const size_t n = (size_t)R * C;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i += 16) {
    if (stream)
      _mm512_stream_ps(y + i, _mm512_loadu_ps(x + i));
    else
      _mm512_storeu_ps(y + i, _mm512_loadu_ps(x + i));
  }
  if (stream) _mm_sfence();
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

typedef void (*Kernel)(const float*, float*, int);

static void run(const char* name, Kernel k, float** in, float* out, int stream, int rotate_out,
                float** outs) {
  double t[REPS];
  for (int r = 0; r < REPS; ++r) {
    float* o = rotate_out ? outs[r % COPIES] : out;
    double t0 = now();
    k(in[r % COPIES], o, stream);
    t[r] = now() - t0;
  }
  qsort(t + 5, REPS - 5, sizeof(double), cmp);
  double med = t[5 + (REPS - 5) / 2];
  printf("%-8s %-9s output %-9s %8.3f ms  %6.1f GB/s (input + output bytes)\n", name,
         stream ? "streaming" : "ordinary", rotate_out ? "rotating" : "reused", med * 1e3,
         2.0 * R * C * 4 / med / 1e9);
}

int main(void) {
  float *in[COPIES], *outs[COPIES];
  for (int c = 0; c < COPIES; ++c) {
    in[c] = aligned_alloc(64, (size_t)R * C * 4);
    outs[c] = aligned_alloc(64, (size_t)R * C * 4);
    for (size_t i = 0; i < (size_t)R * C; ++i)
      in[c][i] = (float)((i * 2654435761u) % 1000) / 250.0f;
    memset(outs[c], 0, (size_t)R * C * 4);
  }
  printf("%d threads\n", omp_get_max_threads());
  for (int rot = 0; rot < 2; ++rot)
    for (int s = 0; s < 2; ++s) {
      run("copy", copy, in, outs[0], s, rot, outs);
      run("softmax", softmax, in, outs[0], s, rot, outs);
    }
  return 0;
}
