// nn::MultiheadAttention: input projections, scaled_dot_product_attention per head, output
// projection, with PyTorch's mask conventions translated to SDPA's.
#include <coil/nn/attention.h>
#include <coil/nn/init.h>
#include <coil/ops.h>

#include <cmath>
#include <limits>
#include <utility>

namespace coil::nn {

namespace {
constexpr const char* kWho = "nn::MultiheadAttention";

// PyTorch's MHA masks say where attention is NOT allowed (bool) or what to add (float); SDPA's
// bool masks say where it IS allowed. Returns the SDPA mask for both masks together (either may
// be undefined), broadcastable to (N, H, L, S).
Tensor merge_masks(const Tensor& attn, const Tensor& padding, DType dtype) {
  if (!attn.defined() && !padding.defined()) return {};
  const bool any_float =
      (attn.defined() && attn.dtype() != kBool) || (padding.defined() && padding.dtype() != kBool);
  if (!any_float) {
    Tensor blocked = attn.defined() && padding.defined() ? logical_or(attn, padding)
                     : attn.defined()                    ? attn
                                                         : padding;
    return logical_not(blocked);
  }
  auto additive = [&](const Tensor& m) {
    if (m.dtype() != kBool) return m.to(dtype);
    return where(m, -std::numeric_limits<double>::infinity(), zeros({}, dtype, m.device()));
  };
  if (!attn.defined()) return additive(padding);
  if (!padding.defined()) return additive(attn);
  return additive(attn) + additive(padding);
}

void check_mask_dtype(const Tensor& m, const char* what) {
  COIL_CHECK(m.dtype() == kBool || m.is_floating_point(), kWho, ": ", what,
             " must be bool (true = not allowed) or floating-point (added to the scores), got ",
             dtype_name(m.dtype()));
}
}  // namespace

MultiheadAttention::MultiheadAttention(int64_t e, int64_t h, MultiheadAttentionOptions o)
    : embed_dim(e), num_heads(h), head_dim(h > 0 ? e / h : 0), options(o) {
  COIL_CHECK(e > 0 && h > 0, kWho, ": embed_dim and num_heads must be positive, got ", e, " and ",
             h);
  COIL_CHECK(e % h == 0, kWho, ": embed_dim (", e, ") must be divisible by num_heads (", h, ")");
  COIL_CHECK(o.dropout >= 0 && o.dropout <= 1, kWho, ": dropout must be in [0, 1], got ",
             o.dropout);
  COIL_CHECK(is_floating(o.dtype), kWho, ": parameters must be floating-point, got dtype ",
             dtype_name(o.dtype));
  Tensor w = empty({3 * e, e}, o.dtype);
  init::xavier_uniform_(w);
  in_proj_weight = register_parameter("in_proj_weight", w);
  in_proj_bias = register_parameter("in_proj_bias", o.bias ? zeros({3 * e}, o.dtype) : Tensor());
  out_proj = register_module("out_proj", std::make_shared<Linear>(e, e, o.bias, o.dtype));
  if (o.bias) init::zeros_(out_proj->bias);
}

MultiheadAttention::Heads MultiheadAttention::prepare(const Tensor& query, const Tensor& key,
                                                      const Tensor& value, const Tensor& attn_mask,
                                                      const Tensor& key_padding_mask,
                                                      bool is_causal) const {
  const int64_t e = embed_dim, h = num_heads, d = head_dim;
  const int64_t rank = query.dim();
  COIL_CHECK((rank == 3 || rank == 2) && key.dim() == rank && value.dim() == rank, kWho,
             ": query, key and value must all be 3-D (batched) or all 2-D (unbatched), got ",
             shape_str(query.sizes()), ", ", shape_str(key.sizes()), " and ",
             shape_str(value.sizes()));
  // Sizes as SymInts: a dynamic capture keeps the batch and the lengths symbolic, and these
  // checks become guards on relations between them.
  COIL_CHECK(query.sym_size(-1) == e && key.sym_size(-1) == e && value.sym_size(-1) == e, kWho,
             ": query, key and value must have embed_dim=", e, " features in their last dim, got ",
             shape_str(query.sizes()), ", ", shape_str(key.sizes()), " and ",
             shape_str(value.sizes()), " (a kdim/vdim different from embed_dim is not supported)");
  // To (N, L, E) / (N, S, E).
  auto batch_major = [&](const Tensor& t) {
    if (rank == 2) return t.unsqueeze(0);
    return options.batch_first ? t : t.transpose(0, 1);
  };
  Tensor q = batch_major(query), k = batch_major(key), v = batch_major(value);
  const SymInt n = q.sym_size(0), l = q.sym_size(1), s = k.sym_size(1);
  COIL_CHECK(k.sym_size(0) == n && v.sym_size(0) == n && v.sym_size(1) == s, kWho,
             ": key and value must have the same batch size as the query and the same sequence ",
             "length, got query ", shape_str(query.sizes()), ", key ", shape_str(key.sizes()),
             " and value ", shape_str(value.sizes()),
             options.batch_first ? " (batch_first: (N, L, E))" : " ((L, N, E); batch_first=false)");

  // The masks, as (N or 1, H or 1, L, S).
  Tensor am, kpm;
  if (attn_mask.defined()) {
    COIL_CHECK(!is_causal, kWho, ": is_causal=true builds the causal mask itself; pass either ",
               "attn_mask or is_causal, not both");
    check_mask_dtype(attn_mask, "attn_mask");
    if (attn_mask.dim() == 2) {
      COIL_CHECK(attn_mask.sym_size(0) == l && attn_mask.sym_size(1) == s, kWho,
                 ": a 2-D attn_mask must be (L, S) = ", shape_str(hints_of({l, s})), ", got ",
                 shape_str(attn_mask.sizes()));
      am = attn_mask;
    } else {
      COIL_CHECK(attn_mask.dim() == 3 && attn_mask.sym_size(0) == n * h &&
                     attn_mask.sym_size(1) == l && attn_mask.sym_size(2) == s,
                 kWho, ": attn_mask must be (L, S) = ", shape_str(hints_of({l, s})),
                 " or (N * num_heads, L, S) = ", shape_str(hints_of({n * h, l, s})), ", got ",
                 shape_str(attn_mask.sizes()));
      am = attn_mask.reshape_symint({n, h, l, s});
    }
  }
  if (key_padding_mask.defined()) {
    check_mask_dtype(key_padding_mask, "key_padding_mask");
    const SymInts expected = rank == 2 ? SymInts{s} : SymInts{n, s};
    const SymInts got = key_padding_mask.sym_sizes();
    bool same = got.size() == expected.size();
    for (size_t i = 0; same && i < got.size(); ++i) same = got[i] == expected[i];
    COIL_CHECK(same, kWho, ": key_padding_mask must be ",
               rank == 2 ? "(S) = " : "(N, S) = ", shape_str(hints_of(expected)), ", got ",
               shape_str(key_padding_mask.sizes()));
    kpm = key_padding_mask.reshape_symint({n, 1, 1, s});
    if (is_causal) {  // SDPA takes a mask or is_causal: make the causal mask explicit
      am = triu(full_symint({l, s}, 1, kBool, q.device()), 1);
      is_causal = false;
    }
  }
  Tensor mask = merge_masks(am, kpm, q.dtype());

  // Projections; self-attention projects once with the whole in_proj_weight.
  Tensor qp, kp, vp;
  if (query.is_same(key) && key.is_same(value)) {
    std::vector<Tensor> qkv = chunk(linear(q, in_proj_weight, in_proj_bias), 3, -1);
    qp = qkv[0], kp = qkv[1], vp = qkv[2];
  } else {
    auto part = [&](const Tensor& t, int64_t i) {
      Tensor b = in_proj_bias.defined() ? in_proj_bias.narrow(0, i * e, e) : Tensor();
      return linear(t, in_proj_weight.narrow(0, i * e, e), b);
    };
    qp = part(q, 0), kp = part(k, 1), vp = part(v, 2);
  }
  auto heads = [&](const Tensor& t, const SymInt& len) {
    return t.reshape_symint({n, len, h, d}).transpose(1, 2);  // (N, H, len, D)
  };
  return {heads(qp, l), heads(kp, s), heads(vp, s), mask, is_causal, rank == 2};
}

Tensor MultiheadAttention::finish(const Tensor& heads_out, bool unbatched) const {
  const SymInt n = heads_out.sym_size(0), l = heads_out.sym_size(2);
  Tensor out = out_proj->forward(heads_out.transpose(1, 2).reshape_symint({n, l, embed_dim}));
  if (unbatched) return out.squeeze(0);
  return options.batch_first ? out : out.transpose(0, 1);
}

Tensor MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                   const Tensor& attn_mask, const Tensor& key_padding_mask,
                                   bool is_causal) {
  Heads x = prepare(query, key, value, attn_mask, key_padding_mask, is_causal);
  const double p = is_training() ? options.dropout : 0.0;
  return finish(scaled_dot_product_attention(x.q, x.k, x.v, x.mask, p, x.is_causal), x.unbatched);
}

std::pair<Tensor, Tensor> MultiheadAttention::forward_with_weights(
    const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_mask,
    const Tensor& key_padding_mask, bool average_attn_weights, bool is_causal) {
  Heads x = prepare(query, key, value, attn_mask, key_padding_mask, is_causal);
  // SDPA's arithmetic, written out so that the weights exist as a tensor.
  Tensor scores = matmul(x.q, x.k.transpose(-2, -1)) * (1.0 / std::sqrt(double(head_dim)));
  Tensor allowed =
      x.is_causal                                   ? logical_not(triu(
                                                          full_symint({x.q.sym_size(2), x.k.sym_size(2)}, 1, kBool, x.q.device()), 1))
      : x.mask.defined() && x.mask.dtype() == kBool ? x.mask
                                                    : Tensor();
  if (allowed.defined())
    scores = where(allowed, scores, zeros({}, scores.dtype(), scores.device()) - INFINITY);
  else if (x.mask.defined())
    scores = scores + x.mask;
  Tensor weights = softmax(scores, -1);
  // As PyTorch: dropout acts on the weights, and the weights returned are the dropped ones.
  if (is_training() && options.dropout > 0) weights = dropout(weights, options.dropout, true);
  Tensor out = finish(matmul(weights, x.v), x.unbatched);
  if (average_attn_weights) weights = mean(weights, {1});
  return {out, x.unbatched ? weights.squeeze(0) : weights};
}

}  // namespace coil::nn
