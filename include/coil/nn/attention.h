// nn::MultiheadAttention, as torch.nn.MultiheadAttention (on scaled_dot_product_attention), with
// PyTorch's parameter names: in_proj_weight [3E, E], in_proj_bias [3E], out_proj.weight [E, E],
// out_proj.bias [E]. Weights saved from PyTorch (embed_dim == kdim == vdim) load as they are.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

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
  // the scores. is_causal masks keys after each query (pass no attn_mask with it). Runs on
  // scaled_dot_product_attention and returns no attention weights (need_weights=False).
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value,
                 const Tensor& attn_mask = {}, const Tensor& key_padding_mask = {},
                 bool is_causal = false);
  // Self-attention: forward(x, x, x).
  Tensor forward(const Tensor& x) override { return forward(x, x, x); }
  // PyTorch's need_weights=True: the output as forward's, and the attention weights (the
  // softmax of the masked scores, after dropout in training), (N, L, S) averaged over the
  // heads or (N, H, L, S) when !average_attn_weights; without N when unbatched. The scores
  // are computed as a tensor rather than inside SDPA's fused kernel.
  std::pair<Tensor, Tensor> forward_with_weights(const Tensor& query, const Tensor& key,
                                                 const Tensor& value, const Tensor& attn_mask = {},
                                                 const Tensor& key_padding_mask = {},
                                                 bool average_attn_weights = true,
                                                 bool is_causal = false);

  int64_t embed_dim, num_heads, head_dim;
  MultiheadAttentionOptions options;
  Tensor in_proj_weight, in_proj_bias;
  std::shared_ptr<Linear> out_proj;

 private:
  // The projected heads (N, H, len, D) and SDPA's mask (true = allowed, or added).
  struct Heads {
    Tensor q, k, v, mask;
    bool is_causal, unbatched;
  };
  Heads prepare(const Tensor& query, const Tensor& key, const Tensor& value,
                const Tensor& attn_mask, const Tensor& key_padding_mask, bool is_causal) const;
  // The heads' attention output (N, H, L, D) through out_proj, in the query's layout.
  Tensor finish(const Tensor& heads_out, bool unbatched) const;
};

}  // namespace coil::nn
