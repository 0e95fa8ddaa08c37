// GPT-2 small (B x T tokens, 2 x 128 unless the environment's B and T say otherwise) training
// steps on the CPU, the loss and AdamW compiled: the first step (the compiles) and the median of
// steps 3..STEPS-1 (STEPS 10 unless set, at least 5), with the loss (equal across builds that
// change only speed); with PROFILE=1, the profiler's table of the last step. Build against a
// build folder and run with OMP_NUM_THREADS set:
//   g++ -std=c++20 -O2 -Iinclude bench/probes/gpt2_cpu_train_step.cpp -Lbuild -lcoil \
//     -Wl,-rpath,$PWD/build -o /tmp/gpt2_cpu_train_step
#include <coil/coil.h>
#include <coil/nn/gpt2.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>
using namespace coil;
static int64_t env_or(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoll(v) : fallback;
}
int main() {
  const int64_t batch = env_or("B", 2), tokens = env_or("T", 128);
  const int steps = static_cast<int>(std::max<int64_t>(env_or("STEPS", 10), 5));
  manual_seed(0);
  auto model = nn::gpt2(nn::GPT2Config::small());
  model->train();
  Tensor ids = randint(0, 50257, {batch, tokens}), labels = randint(0, 50257, {batch, tokens});
  optim::AdamW opt(model->parameters(), {.lr = 1e-4, .compiled = true});
  auto f = coil::compile([&](const Tensor& a, const Tensor& b) {
    Tensor logits = model->forward(a);
    return cross_entropy(logits.reshape({-1, logits.size(-1)}), b.reshape({-1}));
  });
  std::vector<double> ms;
  double loss = 0;
  std::unique_ptr<Profiler> profile;
  for (int i = 0; i < steps; ++i) {
    if (i == steps - 1 && std::getenv("PROFILE")) profile = std::make_unique<Profiler>();
    auto t0 = std::chrono::steady_clock::now();
    opt.zero_grad();
    Tensor l = f(ids, labels);
    l.backward();
    opt.step();
    loss = l.item<double>();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  if (profile) std::printf("%s", profile->table(40).c_str());
  std::vector<double> tail(ms.begin() + 3, ms.end());
  std::sort(tail.begin(), tail.end());
  std::printf("first %.0f ms, median of steps 3-%d %.1f ms (min %.1f), loss %.4f\n", ms[0],
              steps - 1, tail[tail.size() / 2], tail[0], loss);
}
