// GPT-2 as Hugging Face's modeling_gpt2.py: pre-norm blocks, "Conv1D" projections, GELU with the
// tanh approximation, learned positions, the head tied to the token embedding; and greedy
// decoding over a KV cache.
#include <cmath>

#include <coil/autograd.h>
#include <coil/compile.h>
#include <coil/nn/gpt2.h>
#include <coil/nn/init.h>
#include <coil/nn/safetensors.h>
#include <coil/ops.h>

namespace coil::nn {

Conv1D::Conv1D(int64_t in, int64_t out, DType dtype) {
  // As Hugging Face's _init_weights: N(0, 0.02) and zero bias.
  weight = register_parameter("weight", init::normal_(empty({in, out}, dtype), 0, 0.02));
  bias = register_parameter("bias", zeros({out}, dtype));
}

// Sizes are read symbolically throughout, so a graph captured with dynamic batch or sequence
// length stays dynamic (docs/dynamic.md).
Tensor Conv1D::forward(const Tensor& x) {
  SymInts out = x.sym_sizes();
  out.back() = weight.size(1);
  return addmm(bias, x.reshape({-1, x.size(-1)}), weight).view_symint(out);
}

GPT2Attention::GPT2Attention(const GPT2Config& c)
    : n_head(c.n_head), head_dim(c.n_embd / c.n_head) {
  COIL_CHECK(c.n_embd % c.n_head == 0, "nn::GPT2: n_embd (", c.n_embd,
             ") must be a multiple of n_head (", c.n_head, ")");
  c_attn = register_module("c_attn", std::make_shared<Conv1D>(c.n_embd, 3 * c.n_embd, c.dtype));
  c_proj = register_module("c_proj", std::make_shared<Conv1D>(c.n_embd, c.n_embd, c.dtype));
}

Tensor GPT2Attention::forward(const Tensor& x, const Tensor& past_k, const Tensor& past_v,
                              Tensor& k_out, Tensor& v_out) {
  const SymInt batch = x.sym_size(0), len = x.sym_size(1);
  const int64_t embd = x.size(2);
  auto heads = [&](const Tensor& t) {
    return t.view_symint({batch, len, n_head, head_dim}).transpose(1, 2);
  };
  std::vector<Tensor> qkv = split(c_attn->forward(x), embd, 2);
  Tensor q = heads(qkv[0]);
  k_out = heads(qkv[1]);
  v_out = heads(qkv[2]);
  const bool has_past = past_k.defined() && past_k.sym_size(2) > 0;
  if (has_past) {
    k_out = cat({past_k, k_out}, 2);
    v_out = cat({past_v, v_out}, 2);
  }
  Tensor y;
  if (!has_past) {
    y = scaled_dot_product_attention(q, k_out, v_out, {}, 0.0, /*is_causal=*/true);
  } else if (len == 1) {  // one new position sees every key
    y = scaled_dot_product_attention(q, k_out, v_out);
  } else {  // new position i sees the cache and the new positions up to i
    const int64_t past = past_k.size(2), n = x.size(1);
    Tensor mask = tril(ones({n, past + n}, kBool, x.device()), past);
    y = scaled_dot_product_attention(q, k_out, v_out, mask);
  }
  return c_proj->forward(y.transpose(1, 2).reshape_symint({batch, len, embd}));
}

Tensor GPT2Attention::forward(const Tensor& x) {
  Tensor k, v;
  return forward(x, {}, {}, k, v);
}

GPT2MLP::GPT2MLP(const GPT2Config& c) {
  c_fc = register_module("c_fc", std::make_shared<Conv1D>(c.n_embd, 4 * c.n_embd, c.dtype));
  c_proj = register_module("c_proj", std::make_shared<Conv1D>(4 * c.n_embd, c.n_embd, c.dtype));
}

Tensor GPT2MLP::forward(const Tensor& x) { return c_proj->forward(gelu(c_fc->forward(x), "tanh")); }

GPT2Block::GPT2Block(const GPT2Config& c) {
  const LayerNormOptions ln{.eps = c.layer_norm_epsilon, .dtype = c.dtype};
  ln_1 = register_module("ln_1", std::make_shared<LayerNorm>(c.n_embd, ln));
  attn = register_module("attn", std::make_shared<GPT2Attention>(c));
  ln_2 = register_module("ln_2", std::make_shared<LayerNorm>(c.n_embd, ln));
  mlp = register_module("mlp", std::make_shared<GPT2MLP>(c));
}

Tensor GPT2Block::forward(const Tensor& x, const Tensor& past_k, const Tensor& past_v,
                          Tensor& k_out, Tensor& v_out) {
  Tensor h = add(x, attn->forward(ln_1->forward(x), past_k, past_v, k_out, v_out));
  return add(h, mlp->forward(ln_2->forward(h)));
}

Tensor GPT2Block::forward(const Tensor& x) {
  Tensor k, v;
  return forward(x, {}, {}, k, v);
}

GPT2::GPT2(GPT2Config c) : config(c) {
  COIL_CHECK(c.vocab_size > 0 && c.n_positions > 0 && c.n_embd > 0 && c.n_layer > 0 && c.n_head > 0,
             "nn::GPT2: every size of the config must be positive");
  wte = register_module("wte", std::make_shared<Embedding>(c.vocab_size, c.n_embd,
                                                           EmbeddingOptions{.dtype = c.dtype}));
  wpe = register_module("wpe", std::make_shared<Embedding>(c.n_positions, c.n_embd,
                                                           EmbeddingOptions{.dtype = c.dtype}));
  init::normal_(wte->weight, 0, 0.02);
  init::normal_(wpe->weight, 0, 0.01);
  h = register_module("h", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < c.n_layer; ++i) h->push_back(std::make_shared<GPT2Block>(c));
  ln_f = register_module(
      "ln_f", std::make_shared<LayerNorm>(
                  c.n_embd, LayerNormOptions{.eps = c.layer_norm_epsilon, .dtype = c.dtype}));
  // Hugging Face scales the residual projections' init by 1/sqrt(2 * n_layer).
  const double scaled = 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layer));
  for (const auto& block : *h) {
    auto* b = static_cast<GPT2Block*>(block.get());
    init::normal_(b->attn->c_proj->weight, 0, scaled);
    init::normal_(b->mlp->c_proj->weight, 0, scaled);
  }
}

Tensor GPT2::forward(const Tensor& input_ids, const Tensor& position_ids, KVCache& cache) {
  COIL_CHECK(input_ids.dim() == 2 && !is_floating(input_ids.dtype()),
             "nn::GPT2: expected integer token ids of shape (B, T), got ",
             dtype_name(input_ids.dtype()), " ", shape_str(input_ids.sizes()));
  const SymInt cached =
      cache.keys.empty() || !cache.keys[0].defined() ? SymInt(0) : cache.keys[0].sym_size(2);
  COIL_CHECK(cached + input_ids.sym_size(1) <= config.n_positions, "nn::GPT2: ", cached.hint(),
             " cached and ", input_ids.size(1),
             " new positions exceed n_positions = ", config.n_positions);
  if (cache.keys.empty()) {
    cache.keys.resize(h->size());
    cache.values.resize(h->size());
  }
  Tensor x = add(wte->forward(input_ids), wpe->forward(position_ids));
  for (size_t i = 0; i < h->size(); ++i) {
    Tensor k, v;
    x = static_cast<GPT2Block&>(*(*h)[static_cast<int64_t>(i)])
            .forward(x, cache.keys[i], cache.values[i], k, v);
    cache.keys[i] = k;
    cache.values[i] = v;
  }
  return matmul(ln_f->forward(x), wte->weight.t());
}

Tensor GPT2::forward(const Tensor& input_ids) {
  KVCache cache;
  const int64_t len = input_ids.dim() == 2 ? input_ids.size(1) : 0;
  Tensor positions = arange(0, len, 1, kInt64, input_ids.device()).unsqueeze(0);
  return forward(input_ids, positions, cache);
}

std::shared_ptr<GPT2> gpt2(GPT2Config config) { return std::make_shared<GPT2>(config); }

void load_gpt2_checkpoint(GPT2& model, const std::string& path) {
  StateDict dict;
  for (auto& [key, value] : load_safetensors(path)) {
    std::string k = key.rfind("transformer.", 0) == 0 ? key.substr(12) : key;
    const bool mask_buffer =
        k.size() > 5 && (k.ends_with(".attn.bias") || k.ends_with(".attn.masked_bias"));
    if (mask_buffer || k == "lm_head.weight") continue;  // masks are rebuilt; the head is wte
    dict.insert(k, value);
  }
  model.load_state_dict(dict, /*strict=*/true);
}

namespace {

// (B, T, V) logits -> the argmax of the last position's, (B, 1).
Tensor last_argmax(const Tensor& logits) { return argmax(logits.select(1, -1), -1).unsqueeze(1); }

// The decode step's values: `head`, then each layer's keys and values in turn.
std::vector<Tensor> with_cache(Tensor head, const KVCache& cache) {
  std::vector<Tensor> out{std::move(head)};
  for (size_t i = 0; i < cache.keys.size(); ++i) {
    out.push_back(cache.keys[i]);
    out.push_back(cache.values[i]);
  }
  return out;
}

// The cache from such values after their head.
KVCache cache_of(const std::vector<Tensor>& values) {
  KVCache cache;
  for (size_t i = 1; i + 1 < values.size(); i += 2) {
    cache.keys.push_back(values[i]);
    cache.values.push_back(values[i + 1]);
  }
  return cache;
}

}  // namespace

Tensor generate_greedy(GPT2& model, const Tensor& prompt_ids, int64_t max_new_tokens,
                       bool compiled) {
  COIL_CHECK(max_new_tokens >= 0, "nn::generate_greedy: max_new_tokens must be >= 0, got ",
             max_new_tokens);
  NoGradGuard no_grad;
  const int64_t batch = prompt_ids.size(0);
  // One step: the last ids, their positions (B, 1) and the cache -> the next ids and the grown
  // cache, as with_cache lays them out.
  auto step = [&model](const std::vector<Tensor>& state, const Tensor& positions) {
    KVCache cache = cache_of(state);
    Tensor logits = model.forward(state[0], positions, cache);
    return with_cache(last_argmax(logits), cache);
  };
  if (compiled && !model.decode_step_)
    model.decode_step_ = compile(step, CompileOptions{.name = "gpt2_decode_step"});

  KVCache cache;
  const Tensor prompt_positions = arange(0, prompt_ids.size(1), 1, kInt64, prompt_ids.device())
                                      .unsqueeze(0)
                                      .expand({batch, prompt_ids.size(1)});
  std::vector<Tensor> state =
      with_cache(last_argmax(model.forward(prompt_ids, prompt_positions, cache)), cache);
  std::vector<Tensor> generated;
  for (int64_t t = 0; t < max_new_tokens; ++t) {
    generated.push_back(state[0]);
    if (t + 1 == max_new_tokens) break;
    Tensor positions = full({batch, 1}, cache_of(state).length(), kInt64, prompt_ids.device());
    state = compiled ? model.decode_step_(state, positions) : step(state, positions);
  }
  return generated.empty() ? empty({batch, 0}, kInt64, prompt_ids.device()) : cat(generated, 1);
}

}  // namespace coil::nn
