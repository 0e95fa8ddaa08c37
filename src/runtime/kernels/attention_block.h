// Flash-style float32 attention for one block of query rows on one thread, in one AVX-512
// kernel: the scores, their softmax and the output rows, with the scores in the thread's
// cache throughout. At attention's CPU shape (8 x 256 x 64, a block of 128 rows per thread)
// this is faster than blocks whose products are the library's and than the library's batched
// products around a row softmax, and close to the library's two batched products alone, which
// leave the softmax out (bench/probes/attention_kernel.cpp measures it; measured:
// docs/performance.md).
#pragma once

#include <cstdint>

#include <coil/dtype.h>

namespace coil {

// out = softmax(q @ k^T * scale) @ v for n query rows against s keys, each row's softmax over
// keys 0 .. first_row + i when causal (query i of the block is row first_row + i of the whole).
// Elements are read at q[i*q_row + p*q_col], k[j*k_row + p*k_col] (p < e), v[j*v_row + c] and
// written at out[i*out_row + c] (c < ev). As softmax_row: a row whose scores are all -inf gives
// zeros, a NaN or +inf score a NaN row, and weights below e^-87 of the row's largest are 0
// (no subnormal operand reaches the second product; softmax_row.h says why).
// T is float, BFloat16 or Half: 16-bit elements are widened as they are loaded, everything is
// computed in float32, and each output element is rounded once, when it is stored.
template <typename T>
struct AttentionBlock {
  const T* q;
  int64_t q_row, q_col;
  const T* k;
  int64_t k_row, k_col;
  const T* v;
  int64_t v_row;
  T* out;
  int64_t out_row;
  int64_t n, s, e, ev, first_row;
  float scale;
  bool causal;
};

// Whether this CPU runs attention_block (it needs AVX-512 with its byte and word instructions, and
// F16C).
bool attention_block_available();

// Computes the block on the calling thread, in scratch memory of the thread's own; returns
// false, computing nothing, where that cannot grow to the block's size. It throws nothing, as
// a parallel region must not.
bool attention_block(const AttentionBlock<float>& b);
bool attention_block(const AttentionBlock<BFloat16>& b);
bool attention_block(const AttentionBlock<Half>& b);

}  // namespace coil
