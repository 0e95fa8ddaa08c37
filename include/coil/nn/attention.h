// nn::MultiheadAttention, as torch.nn.MultiheadAttention (on scaled_dot_product_attention), with
// PyTorch's parameter names: in_proj_weight [3E, E], in_proj_bias [3E], out_proj.weight [E, E],
// out_proj.bias [E]. Weights saved from PyTorch (embed_dim == kdim == vdim) load as they are.
#pragma once

#include <cstdint>
#include <memory>

#include <coil/nn/linear.h>
#include <coil/nn/module.h>

namespace coil::nn {

struct MultiheadAttentionOptions {
  double dropout = 0.0;      // on the attention weights, in training mode
  bool bias = true;          // in_proj_bias and out_proj.bias
  bool batch_first = false;  // (N, L, E) instead of PyTorch's default (L, N, E)
  DType dtype = kFloat32;
};

class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, MultiheadAttentionOptions options = {});

  // query (L, N, E), key and value (S, N, E) ((N, L, E) / (N, S, E) when batch_first; (L, E) /
  // (S, E) unbatched) -> the attention output, shaped as the query.
  // attn_mask: (L, S) or (N * num_heads, L, S); key_padding_mask: (N, S) (or (S) unbatched).
  // As in PyTorch, a bool mask is true where attention is NOT allowed; a float mask is added to
  // the scores. is_causal masks keys after each query (pass no attn_mask with it). The
  // attention weights are not returned (PyTorch's need_weights=False).
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value,
                 const Tensor& attn_mask = {}, const Tensor& key_padding_mask = {},
                 bool is_causal = false);
  // Self-attention: forward(x, x, x).
  Tensor forward(const Tensor& x) override { return forward(x, x, x); }

  int64_t embed_dim, num_heads, head_dim;
  MultiheadAttentionOptions options;
  Tensor in_proj_weight, in_proj_bias;
  std::shared_ptr<Linear> out_proj;
};

}  // namespace coil::nn
