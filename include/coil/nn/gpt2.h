// GPT-2 (Radford et al., "Language Models are Unsupervised Multitask Learners") as Hugging
// Face's GPT2Model builds it, with its parameter names (wte.weight, h.0.attn.c_attn.weight,
// h.0.mlp.c_proj.bias, ln_f.weight, ...) and its "Conv1D" layers (weight [in, out], y = x W + b),
// and the language-model head tied to the token embedding, so a Hugging Face checkpoint saved as
// safetensors loads with load_gpt2_checkpoint.
//
//   auto model = coil::nn::gpt2(coil::nn::GPT2Config::small());
//   coil::nn::load_gpt2_checkpoint(*model, "gpt2.safetensors");
//   Tensor logits = model->forward(ids);                        // (B, T) int64 -> (B, T, vocab)
//   Tensor more = coil::nn::generate_greedy(*model, prompt, 20);  // a compiled step per token
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <coil/nn/container.h>
#include <coil/nn/embedding.h>
#include <coil/nn/normalization.h>

namespace coil::nn {

struct GPT2Config {
  int64_t vocab_size = 50257;
  int64_t n_positions = 1024;
  int64_t n_embd = 768;
  int64_t n_layer = 12;
  int64_t n_head = 12;
  double layer_norm_epsilon = 1e-5;
  DType dtype = kFloat32;
  static GPT2Config small() { return {}; }  // GPT-2 small, 124M parameters
};

// Hugging Face's Conv1D: a linear layer whose weight is stored [in, out].
class Conv1D : public Module {
 public:
  Conv1D(int64_t in_features, int64_t out_features, DType dtype);
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;
};

// The keys and values of every layer so far, (B, n_head, T, head_dim) each; empty before the
// first call.
struct KVCache {
  std::vector<Tensor> keys, values;
  int64_t length() const { return keys.empty() || !keys[0].defined() ? 0 : keys[0].size(2); }
};

// Causal self-attention: c_attn makes q, k and v; c_proj mixes the heads' outputs.
class GPT2Attention : public Module {
 public:
  explicit GPT2Attention(const GPT2Config& config);
  // With a cache (k, v of the positions before x's), x's keys and values are appended to them
  // and returned in `k_out`, `v_out`; x attends to every earlier position and causally to its
  // own.
  Tensor forward(const Tensor& x, const Tensor& past_k, const Tensor& past_v, Tensor& k_out,
                 Tensor& v_out);
  Tensor forward(const Tensor& x) override;
  int64_t n_head, head_dim;
  std::shared_ptr<Conv1D> c_attn, c_proj;
};

class GPT2MLP : public Module {
 public:
  explicit GPT2MLP(const GPT2Config& config);
  Tensor forward(const Tensor& x) override;  // c_proj(gelu_tanh(c_fc(x)))
  std::shared_ptr<Conv1D> c_fc, c_proj;
};

class GPT2Block : public Module {
 public:
  explicit GPT2Block(const GPT2Config& config);
  Tensor forward(const Tensor& x, const Tensor& past_k, const Tensor& past_v, Tensor& k_out,
                 Tensor& v_out);
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<LayerNorm> ln_1, ln_2;
  std::shared_ptr<GPT2Attention> attn;
  std::shared_ptr<GPT2MLP> mlp;
};

class GPT2 : public Module {
 public:
  explicit GPT2(GPT2Config config = {});
  // Token ids (B, T) int64 -> logits (B, T, vocab_size), positions 0..T-1.
  Tensor forward(const Tensor& input_ids) override;
  // With a cache: the ids continue the cached positions (their positions are given, (B, T)
  // int64); the cache grows by T. Returns the logits of the new positions.
  Tensor forward(const Tensor& input_ids, const Tensor& position_ids, KVCache& cache);
  GPT2Config config;
  std::shared_ptr<Embedding> wte, wpe;
  std::shared_ptr<ModuleList> h;
  std::shared_ptr<LayerNorm> ln_f;

 private:
  friend Tensor generate_greedy(GPT2&, const Tensor&, int64_t, bool);
  // The compiled decode step generate_greedy made: its graphs serve every later call.
  std::function<std::vector<Tensor>(const std::vector<Tensor>&, const Tensor&)> decode_step_;
};

std::shared_ptr<GPT2> gpt2(GPT2Config config = {});

// Loads a Hugging Face GPT2Model (or GPT2LMHeadModel: the "transformer." prefix and the tied
// lm_head.weight are dropped) checkpoint in safetensors, strictly: the attention mask buffers
// older checkpoints carry (h.N.attn.bias, h.N.attn.masked_bias) are skipped; any other missing,
// unexpected or mis-shaped tensor is a coil::Error naming it.
void load_gpt2_checkpoint(GPT2& model, const std::string& path);

// Greedy decoding: `max_new_tokens` ids after `prompt_ids` (B, T) int64, each the argmax of the
// last position's logits. The prompt runs once; then each new token is one call of a step that
// reads and extends a KV cache. With `compiled`, that step is coil::compile'd once: its graph
// turns dynamic in the cache length after the second size (automatic dynamic shapes), so every
// later position reuses it, and the model keeps it for later calls. Returns (B, max_new_tokens).
Tensor generate_greedy(GPT2& model, const Tensor& prompt_ids, int64_t max_new_tokens,
                       bool compiled = true);

}  // namespace coil::nn
