// A small causal transformer language model (characters in, next character out: an embedding,
// two pre-norm blocks of masked self-attention and an MLP, a final LayerNorm) trained on a text
// file, eagerly and compiled, in lockstep from the same weights with AdamW. Prints both losses
// step by step and the time per step; exits with 1 unless they agree over every step.
//
//   train_transformer [--device cpu|cuda] [text file] [steps]
//                     (default: the CPU, this repository's README.md, 100 steps)
//
// With a GPU asked for and none there, it exits with 77 (a skip, for ctest).
#include <coil/coil.h>
#include <coil/cuda.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace coil;

namespace {

constexpr int64_t kContext = 32, kEmbed = 64, kHeads = 4, kBatch = 16;

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

class CharLM : public nn::Module {
 public:
  explicit CharLM(int64_t vocab) {
    tokens = register_module("tokens", std::make_shared<nn::Embedding>(vocab, kEmbed));
    positions = register_module("positions", std::make_shared<nn::Embedding>(kContext, kEmbed));
    blocks = register_module("blocks", std::make_shared<nn::Sequential>(std::make_shared<Block>(),
                                                                        std::make_shared<Block>()));
    ln = register_module("ln", std::make_shared<nn::LayerNorm>(kEmbed));
    head = register_module("head", std::make_shared<nn::Linear>(kEmbed, vocab));
  }
  // ids [B, T] -> logits [B, T, vocab]
  Tensor forward(const Tensor& ids) override {
    Tensor x = tokens->forward(ids) +
               positions->forward(arange_symint(ids.sym_size(1), std::nullopt, ids.device()));
    return head->forward(ln->forward(blocks->forward(x)));
  }
  std::shared_ptr<nn::Embedding> tokens, positions;
  std::shared_ptr<nn::Sequential> blocks;
  std::shared_ptr<nn::LayerNorm> ln;
  std::shared_ptr<nn::Linear> head;
};

Tensor loss_of(nn::Module& model, const Tensor& x, const Tensor& y) {
  Tensor logits = model.forward(x);
  return cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  Device device = kCPU;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--device" && i + 1 < argc)
      device = Device(argv[++i]);
    else
      args.push_back(argv[i]);
  }
  if (device.is_cuda() && !cuda::is_available()) {
    std::printf("no GPU: skipped\n");
    return 77;
  }
  const std::string path = !args.empty() ? args[0] : COIL_SOURCE_DIR "/README.md";
  const int steps = args.size() > 1 ? std::atoi(args[1].c_str()) : 100;
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    return 2;
  }
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  COIL_CHECK(text.size() > kContext + 1, "train_transformer: ", path, " is too short");
  std::map<char, int64_t> vocab;
  for (char ch : text) vocab.emplace(ch, 0);
  int64_t next_id = 0;
  for (auto& [ch, id] : vocab) id = next_id++;
  std::vector<int64_t> ids;
  for (char ch : text) ids.push_back(vocab[ch]);
  std::printf("%s: %zu characters, %lld distinct\n", path.c_str(), text.size(),
              static_cast<long long>(vocab.size()));

  manual_seed(0);
  auto eager_model = std::make_shared<CharLM>(next_id);
  auto compiled_model = std::make_shared<CharLM>(next_id);
  compiled_model->load_state_dict(eager_model->state_dict());
  eager_model->to(device);
  compiled_model->to(device);
  optim::AdamW eager_opt(eager_model->parameters(), {.lr = 3e-3});
  optim::AdamW compiled_opt(compiled_model->parameters(), {.lr = 3e-3, .compiled = true});
  auto compiled_loss =
      compile([&](const Tensor& x, const Tensor& y) { return loss_of(*compiled_model, x, y); },
              CompileOptions{.name = "lm_step"});

  std::mt19937_64 rng(7);
  std::uniform_int_distribution<size_t> start(0, ids.size() - kContext - 2);
  std::printf("%6s %12s %12s %10s\n", "step", "eager loss", "compiled", "|diff|");
  double worst = 0, eager_s = 0, compiled_s = 0, first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    std::vector<int64_t> xs, ys;
    for (int64_t b = 0; b < kBatch; ++b) {
      const size_t s = start(rng);
      xs.insert(xs.end(), ids.begin() + s, ids.begin() + s + kContext);
      ys.insert(ys.end(), ids.begin() + s + 1, ids.begin() + s + kContext + 1);
    }
    Tensor x = tensor(xs, Shape{kBatch, kContext}).to(device),
           y = tensor(ys, Shape{kBatch, kContext}).to(device);
    auto t0 = std::chrono::steady_clock::now();
    Tensor le = loss_of(*eager_model, x, y);
    le.backward();
    eager_opt.step();
    eager_opt.zero_grad();
    if (step > 0) eager_s += seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    Tensor lc = compiled_loss(x, y);
    lc.backward();
    compiled_opt.step();
    compiled_opt.zero_grad();
    if (step > 0) compiled_s += seconds_since(t0);  // the first step compiles
    const double e = le.item<double>(), c = lc.item<double>();
    if (step == 0) first = e;
    last = e;
    worst = std::max(worst, std::abs(e - c) / std::max(1.0, std::abs(e)));
    if (step % 10 == 0 || step == steps - 1)
      std::printf("%6d %12.6f %12.6f %10.2e\n", step, e, c, std::abs(e - c));
  }
  std::printf("\nloss %.3f -> %.3f over %d steps; largest relative difference %.2e\n", first, last,
              steps, worst);
  if (steps > 1)
    std::printf("time per step (forward + backward + AdamW): eager %.2f ms, compiled %.2f ms\n",
                1e3 * eager_s / (steps - 1), 1e3 * compiled_s / (steps - 1));
  const bool ok = worst < 1e-3 && last < first;
  std::printf("%s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
