// Self-attention's backward for one batch entry on the calling thread, flash-style: a block of
// query rows at a time, its weights made again from q and k, and every product of the block the
// BLAS's (single-threaded inside a parallel region), so that no sequence x sequence tensor is
// written out and, with causal attention, the keys past a block's last row are never touched
// (half the products' work). The eager op scaled_dot_product_attention_backward takes it on the
// CPU, one task per batch entry.
#pragma once

#include <coil/device.h>
#include <coil/dtype.h>

#include <cstdint>

namespace coil {

// For n queries against n keys of e features (rows of q, k, v, g = dout and o = out at their own
// row strides, features contiguous): p = softmax(q k^T * scale) (keys 0..i for query i when
// causal), dv = p^T g, ds = p * (g v^T - rowsum(g * o)) * scale, dq = ds k, dk = ds^T q, written
// as rows of e features d_row apart.
template <typename T>
struct AttentionBackwardEntry {
  const T *q, *k, *v, *g, *o;
  int64_t q_row, k_row, v_row, g_row, o_row;
  T *dq, *dk, *dv;
  int64_t d_row;
  int64_t n, e;
  T scale;
  bool causal;
};

// Returns false, computing nothing, where the block's scratch cannot be allocated. It throws
// nothing, as a parallel region must not.
bool attention_backward_entry(const AttentionBackwardEntry<float>& a);
bool attention_backward_entry(const AttentionBackwardEntry<double>& a);

}  // namespace coil
