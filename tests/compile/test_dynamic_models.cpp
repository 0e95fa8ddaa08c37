// Dynamic shapes on model-shaped programs, with the default (automatic) dynamic: a transformer
// language model over 30 sequence lengths and an MLP over changing batch sizes each compile at
// most two graphs (static for the first size, then one over the size that changed), and every
// call matches eager.
#include "testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

constexpr int64_t kEmbed = 32, kHeads = 4, kVocab = 50, kContext = 64;

class Block : public nn::Module {
 public:
  Block() {
    ln1 = register_module("ln1", std::make_shared<nn::LayerNorm>(kEmbed));
    attn = register_module("attn",
                           std::make_shared<nn::MultiheadAttention>(
                               kEmbed, kHeads, nn::MultiheadAttentionOptions{.batch_first = true}));
    ln2 = register_module("ln2", std::make_shared<nn::LayerNorm>(kEmbed));
    mlp = register_module(
        "mlp", std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(kEmbed, 4 * kEmbed),
                                                std::make_shared<nn::GELU>(),
                                                std::make_shared<nn::Linear>(4 * kEmbed, kEmbed)));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = ln1->forward(x);
    Tensor y = x + attn->forward(h, h, h, {}, {}, /*is_causal=*/true);
    return y + mlp->forward(ln2->forward(y));
  }
  std::shared_ptr<nn::LayerNorm> ln1, ln2;
  std::shared_ptr<nn::MultiheadAttention> attn;
  std::shared_ptr<nn::Sequential> mlp;
};

class TinyLM : public nn::Module {
 public:
  TinyLM() {
    tokens = register_module("tokens", std::make_shared<nn::Embedding>(kVocab, kEmbed));
    positions = register_module("positions", std::make_shared<nn::Embedding>(kContext, kEmbed));
    block = register_module("block", std::make_shared<Block>());
    head = register_module("head", std::make_shared<nn::Linear>(kEmbed, kVocab));
  }
  Tensor forward(const Tensor& ids) override {
    Tensor x = tokens->forward(ids) +
               positions->forward(arange_symint(ids.sym_size(1), std::nullopt, ids.device()));
    return head->forward(block->forward(x));
  }
  std::shared_ptr<nn::Embedding> tokens, positions;
  std::shared_ptr<Block> block;
  std::shared_ptr<nn::Linear> head;
};

}  // namespace

TEST(DynamicModels, TransformerOverThirtySequenceLengths) {
  compiler_reset();
  manual_seed(7);
  auto model = std::make_shared<TinyLM>();
  model->eval();
  NoGradGuard no_grad;
  auto compiled = compile(model);
  for (int64_t len = 3; len < 33; ++len) {
    SCOPED_TRACE("length " + std::to_string(len));
    Tensor ids = randint(0, kVocab, {2, len});
    Tensor got = compiled(ids), want = model->forward(ids);
    ASSERT_EQ(got.sizes(), want.sizes());
    expect_close(got, values(want), want.sizes(), 1e-4, 1e-4);
  }
  EXPECT_LE(counters()["captures"], 2);
}

TEST(DynamicModels, MlpOverChangingBatches) {
  compiler_reset();
  manual_seed(8);
  auto mlp = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(20, 64),
                                              std::make_shared<nn::ReLU>(),
                                              std::make_shared<nn::Linear>(64, 10));
  NoGradGuard no_grad;
  auto compiled = compile(mlp);
  for (int64_t batch : {32, 32, 17, 64, 5, 100, 3, 32}) {
    Tensor x = random({batch, 20});
    Tensor got = compiled(x), want = mlp->forward(x);
    expect_close(got, values(want), want.sizes(), 1e-4, 1e-5);
  }
  EXPECT_LE(counters()["captures"], 2);
}
