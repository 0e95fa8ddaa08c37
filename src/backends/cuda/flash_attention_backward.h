// scaled_dot_product_attention's backward on the GPU in two kernels of coil's own, as flash
// attention's backward: the weights are made again tile by tile from q, k and the rows'
// log-sum-exp, never stored whole. For self-attention without a mask (or with a causal one) and
// without dropout, float32, head sizes up to kAttentionBackwardMaxHead. Compiled with NVRTC per
// head size.
#pragma once

#include <string>

#include <coil/tensor.h>

#include "runtime/cuda_runtime.h"

namespace coil::cuda {

// Whether the kernels take a query (and so key, value, output and gradient) like `q`.
bool attention_backward_fits(const Tensor& q);

// grads (contiguous float32 [3, batch..., L, E]) = dq, dk, dv of out = attention(q, k, v) for
// the output's gradient g; q, k, v, o and g of one shape [batch..., L, E], any strides.
void attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& o, const Tensor& grads, double scale, bool causal);

// The kernels' source for a head size (for the tests that compile it without a GPU).
std::string attention_backward_source(int64_t head);

}  // namespace coil::cuda
