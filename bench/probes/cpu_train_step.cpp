// Training steps on the CPU, the loss and the optimizer's step compiled as in coil-bench-models:
//   cpu_train_step gpt2      GPT-2 small on B x T tokens (2 x 128 unless the environment's B
//                            and T say otherwise), AdamW;
//   cpu_train_step resnet50  ResNet-50 on B images of 224² (8 unless B says otherwise), SGD with
//                            momentum 0.9; NCHW, or channels-last with CHANNELS_LAST=1.
// Prints the first step (the compiles) and the median of steps 3..STEPS-1 (STEPS 10 unless set,
// at least 5), with the loss (equal across builds that change only speed); with PROFILE=1, the
// profiler's table of the last step. Build against a build folder and run with OMP_NUM_THREADS:
//   g++ -std=c++20 -O2 -Iinclude bench/probes/cpu_train_step.cpp -Lbuild -lcoil \
//     -Wl,-rpath,$PWD/build -o build/probes/cpu_train_step
#include <coil/coil.h>
#include <coil/nn/gpt2.h>
#include <coil/nn/resnet.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>
using namespace coil;

static int64_t env_or(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoll(v) : fallback;
}

int main(int argc, char** argv) {
  const std::string model_name = argc > 1 ? argv[1] : "gpt2";
  const int steps = static_cast<int>(std::max<int64_t>(env_or("STEPS", 10), 5));
  manual_seed(0);
  std::unique_ptr<optim::Optimizer> opt;
  std::function<Tensor()> loss_of;
  if (model_name == "gpt2") {
    const int64_t batch = env_or("B", 2), tokens = env_or("T", 128);
    auto gpt2 = nn::gpt2(nn::GPT2Config::small());
    gpt2->train();
    Tensor ids = randint(0, 50257, {batch, tokens}), labels = randint(0, 50257, {batch, tokens});
    opt = std::make_unique<optim::AdamW>(gpt2->parameters(),
                                         optim::AdamWOptions{.lr = 1e-4, .compiled = true});
    auto f = coil::compile([gpt2](const Tensor& a, const Tensor& b) {
      Tensor logits = gpt2->forward(a);
      return cross_entropy(logits.reshape({-1, logits.size(-1)}), b.reshape({-1}));
    });
    loss_of = [f, ids, labels]() mutable { return f(ids, labels); };
  } else if (model_name == "resnet50") {
    auto resnet = nn::resnet50();
    Tensor x = randn({env_or("B", 8), 3, 224, 224});
    if (env_or("CHANNELS_LAST", 0)) {
      resnet->to(MemoryFormat::ChannelsLast);
      x = x.contiguous(MemoryFormat::ChannelsLast);
    }
    Tensor y = randint(0, 1000, {x.size(0)});
    opt = std::make_unique<optim::SGD>(
        resnet->parameters(), optim::SGDOptions{.lr = 0.01, .momentum = 0.9, .compiled = true});
    auto f = coil::compile([resnet](const Tensor& a, const Tensor& b) {
      return cross_entropy(resnet->forward(a), b);
    });
    loss_of = [f, x, y]() mutable { return f(x, y); };
  } else {
    std::fprintf(stderr, "usage: cpu_train_step gpt2|resnet50\n");
    return 2;
  }
  std::vector<double> ms;
  double loss = 0;
  std::unique_ptr<Profiler> profile;
  for (int i = 0; i < steps; ++i) {
    if (i == steps - 1 && std::getenv("PROFILE")) profile = std::make_unique<Profiler>();
    auto t0 = std::chrono::steady_clock::now();
    opt->zero_grad();
    Tensor l = loss_of();
    l.backward();
    opt->step();
    loss = l.item<double>();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  if (profile) std::printf("%s", profile->table(40).c_str());
  std::vector<double> tail(ms.begin() + 3, ms.end());
  std::sort(tail.begin(), tail.end());
  std::printf("%s: first %.0f ms, median of steps 3-%d %.1f ms (min %.1f), loss %.4f\n",
              model_name.c_str(), ms[0], steps - 1, tail[tail.size() / 2], tail[0], loss);
}
