// scaled_dot_product_attention on the GPU in one kernel of coil's own, as flash attention: the
// scores are never stored; each query row keeps a running maximum and sum of its softmax
// (the online softmax) while tiles of keys and values pass through shared memory. For no mask
// or a causal one, without dropout, head sizes up to kFusedAttentionMaxHead, every floating
// dtype (16-bit ones computed in float32). Compiled with NVRTC per dtype and head sizes.
#pragma once

#include <string>

#include <coil/tensor.h>

namespace coil::cuda {

// An operand as the attention kernels read it: its batch folded into two levels (outer, inner)
// with a stride each, then rows, with unit stride along the features. A broadcast batch dim has
// stride 0; a layout that does not fold is copied first (into `t`). A `result` the kernels
// write always folds (its layout is the op's meta's: contiguous, or stored token-major).
struct AttentionOperand {
  Tensor t;
  int64_t outer = 0, inner = 0, row = 0;
};
AttentionOperand attention_operand(const Tensor& x, const Shape& batch, bool result = false);

// Whether the kernel takes these head sizes (query/key features, value features).
bool attention_fits(int64_t head, int64_t value_head);

// out ([batch..., L, Ev], any strides) = softmax(q k^T * scale) v over the last two dims, the
// softmax over keys j <= i for row i when `causal`, a row with no key giving zeros. q [..., L,
// E], k [..., S, E], v [..., S, Ev], their batch dims broadcasting to out's; any strides.
void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, double scale,
               bool causal);

// The kernel's source for a dtype and head sizes (for the tests that compile it without a GPU).
std::string attention_kernel_source(DType dtype, int64_t head, int64_t value_head);

}  // namespace coil::cuda
