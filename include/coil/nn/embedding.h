// nn::Embedding, as torch.nn.Embedding: a lookup table of num_embeddings rows.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include <coil/nn/module.h>

namespace coil::nn {

struct EmbeddingOptions {
  // The row that gets no gradient (a padding token); it starts as zeros. Negative values
  // count from the end.
  std::optional<int64_t> padding_idx;
  DType dtype = kFloat32;
};

// Integer indices of any shape -> their rows: shape indices.sizes() + [embedding_dim].
// weight: [num_embeddings, embedding_dim], N(0, 1).
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, EmbeddingOptions options = {});
  // A table over `embeddings` (2-D, shared, not copied); with freeze it is not trained.
  static std::shared_ptr<Embedding> from_pretrained(const Tensor& embeddings, bool freeze = true,
                                                    std::optional<int64_t> padding_idx = {});
  Tensor forward(const Tensor& indices) override;
  std::string extra_repr() const override;

  int64_t num_embeddings, embedding_dim;
  std::optional<int64_t> padding_idx;  // non-negative once constructed
  Tensor weight;

 private:
  struct FromWeight {};
  Embedding(FromWeight, const Tensor& weight, bool freeze, std::optional<int64_t> padding_idx);
  void set_padding_idx(std::optional<int64_t> idx);
};

}  // namespace coil::nn
