// scaled_dot_product_attention in bfloat16 and float16 on the tensor cores, through cuDNN's fused
// flash attention (its graph API, cudnn_graph.h): forward with the rows' log-sum-exp, and
// backward from it. No mask or a causal one (top-left aligned, as PyTorch's is_causal), no
// dropout, head sizes multiples of 8 up to kFusedAttentionMaxHead. A graph is built once per
// dtype, sizes and strides and kept. Each call returns false where cuDNN does not take the
// operands (the caller runs coil's own kernel or the decomposition).
#pragma once

#include <string>
#include <vector>

#include <coil/tensor.h>

namespace coil::cuda {

// Whether the dtype and head sizes are cuDNN's (the operands' layouts are checked per call).
bool cudnn_attention_takes(DType dtype, int64_t head, int64_t value_head);

// out ([batch..., L, Ev]) = attention(q, k, v) as flash_attention.h's attention; `stats`, where
// defined (float32, contiguous [batch..., L]), gets each row's log-sum-exp of its scaled scores.
bool cudnn_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                     const Tensor& stats, double scale, bool causal);

// grads ([3, batch..., L, E], any strides) = dq, dk, dv of out = attention(q, k, v) for the
// output's gradient g, from the forward's `stats`; self-attention (q, k, v of one shape).
bool cudnn_attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& o, const Tensor& stats, const Tensor& grads,
                              double scale, bool causal);

// Each graph built so far, a line each: the pass, dtype and query dims, and cuDNN's plan with
// the times it ran, or why it declined (coil's kernels ran instead).
std::vector<std::string> cudnn_attention_graphs();

}  // namespace coil::cuda
