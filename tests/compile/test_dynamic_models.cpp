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

// Convolutions with every input dim symbolic (dynamic=true, the weight's too): the window's size
// is specialised, as a model's constant; the spatial sizes stay symbolic where the output's size
// is provably non-negative within the symbols' ranges (padding covers the window), and are
// specialised where it is not (a 5-wide window without padding). Every call matches eager.
TEST(DynamicModels, ConvolutionsOverSymbolicSizes) {
  manual_seed(9);
  for (auto [k, pad] : {std::pair<int64_t, int64_t>{3, 1}, {5, 0}}) {
    SCOPED_TRACE("kernel " + std::to_string(k) + ", padding " + std::to_string(pad));
    compiler_reset();
    auto f = [pad](const Tensor& x, const Tensor& w, const Tensor& b) {
      return relu(conv2d(x, w, b, {1, 1}, {pad, pad}));
    };
    auto cf = compile(f, {.dynamic = true});
    Tensor w = random({6, 4, k, k}), b = random({6});
    for (auto [n, h, wd] : {std::tuple{2, 12, 12}, {3, 9, 14}, {2, 16, 7}}) {
      Tensor x = random({n, 4, h, wd});
      Tensor got = cf(x, w, b), want = f(x, w, b);
      expect_close(got, values(want), want.sizes(), 1e-4, 1e-5);
    }
    if (pad == 1) {
      EXPECT_EQ(counters()["captures"], 1);  // one graph for every size
    }
  }
}
