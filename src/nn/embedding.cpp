#include <coil/nn/embedding.h>
#include <coil/nn/init.h>
#include <coil/ops.h>

#include "runtime/copy.h"

namespace coil::nn {

void Embedding::set_padding_idx(std::optional<int64_t> idx) {
  if (!idx) return;
  COIL_CHECK(*idx >= -num_embeddings && *idx < num_embeddings, "nn::Embedding: padding_idx ", *idx,
             " must be within num_embeddings (", num_embeddings, ")");
  padding_idx = *idx < 0 ? *idx + num_embeddings : *idx;
}

Embedding::Embedding(int64_t num, int64_t dim, EmbeddingOptions o)
    : num_embeddings(num), embedding_dim(dim) {
  COIL_CHECK(num > 0 && dim >= 0, "nn::Embedding: num_embeddings must be positive and ",
             "embedding_dim non-negative, got ", num, " and ", dim);
  COIL_CHECK(is_floating(o.dtype), "nn::Embedding: the table must be floating-point, got dtype ",
             dtype_name(o.dtype));
  set_padding_idx(o.padding_idx);
  Tensor w = empty({num, dim}, o.dtype);
  init::normal_(w);
  if (padding_idx) fill(w.select(0, *padding_idx), 0);
  weight = register_parameter("weight", w);
}

Embedding::Embedding(FromWeight, const Tensor& w, bool freeze, std::optional<int64_t> idx)
    : num_embeddings(w.size(0)), embedding_dim(w.size(1)) {
  set_padding_idx(idx);
  weight = register_parameter("weight", w.detach(), !freeze);
}

std::shared_ptr<Embedding> Embedding::from_pretrained(const Tensor& w, bool freeze,
                                                      std::optional<int64_t> idx) {
  COIL_CHECK(w.defined() && w.dim() == 2, "nn::Embedding::from_pretrained: expected a 2-D table ",
             "(num_embeddings, embedding_dim), got ",
             w.defined() ? shape_str(w.sizes()) : std::string("an undefined tensor"));
  COIL_CHECK(w.is_floating_point(), "nn::Embedding::from_pretrained: the table must be ",
             "floating-point, got dtype ", dtype_name(w.dtype()));
  return std::shared_ptr<Embedding>(new Embedding(FromWeight{}, w, freeze, idx));
}

Tensor Embedding::forward(const Tensor& indices) {
  COIL_CHECK(is_integral(indices.dtype()), "nn::Embedding(", num_embeddings, ", ", embedding_dim,
             "): indices must be integers (int64 or int32), got dtype ",
             dtype_name(indices.dtype()));
  return embedding(weight, indices, padding_idx.value_or(-1));
}

std::string Embedding::extra_repr() const {
  std::string s = detail::str_cat(num_embeddings, ", ", embedding_dim);
  if (padding_idx) s += detail::str_cat(", padding_idx=", *padding_idx);
  return s;
}

}  // namespace coil::nn
