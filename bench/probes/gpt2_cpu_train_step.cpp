// GPT-2 small (2 x 128 tokens) training steps on the CPU, the loss and AdamW compiled: the first
// step (the compiles) and the median of steps 3..9, with the loss (equal across builds that
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
int main() {
  manual_seed(0);
  auto model = nn::gpt2(nn::GPT2Config::small());
  model->train();
  Tensor ids = randint(0, 50257, {2, 128}), labels = randint(0, 50257, {2, 128});
  optim::AdamW opt(model->parameters(), {.lr = 1e-4, .compiled = true});
  auto f = coil::compile([&](const Tensor& a, const Tensor& b) {
    Tensor logits = model->forward(a);
    return cross_entropy(logits.reshape({-1, logits.size(-1)}), b.reshape({-1}));
  });
  std::vector<double> ms;
  double loss = 0;
  std::unique_ptr<Profiler> profile;
  for (int i = 0; i < 10; ++i) {
    if (i == 9 && std::getenv("PROFILE")) profile = std::make_unique<Profiler>();
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
  std::printf("first %.0f ms, median of steps 3-9 %.1f ms (min %.1f), loss %.4f\n", ms[0], tail[3],
              tail[0], loss);
}
