// coil's time for the matrix products of one GPT-2 small training step (B x T tokens, 8 x 512
// unless the environment says otherwise) on the CPU, in the layouts its compiled step calls
// them: each linear layer's forward (addmm with the weight read transposed; the tied head a
// plain mm), its input's gradient (dy W) and its weight's gradient (dy^T x). The same table as
// bench/probes/torch_gpt2_products.py prints for PyTorch; the library is COIL_MATMUL_LIBRARY's.
// Build against a build folder and run with OMP_NUM_THREADS set:
//   g++ -std=c++20 -O2 -Iinclude bench/probes/gpt2_products.cpp -Lbuild -lcoil \
//     -Wl,-rpath,$PWD/build -o /tmp/gpt2_products
#include <coil/coil.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
using namespace coil;

static int64_t env_or(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoll(v) : fallback;
}

// The best of `reps` calls after one to warm up, in seconds.
static double timed(const std::function<Tensor()>& f, int reps = 3) {
  f();
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    Tensor r = f();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

int main() {
  const int64_t tokens = env_or("B", 8) * env_or("T", 512), layers = 12, d = 768, vocab = 50257;
  struct Linear {
    int64_t m, k, n, count;
    bool bias;
  };
  const Linear linears[] = {{tokens, d, 3 * d, layers, true},
                            {tokens, d, d, layers, true},
                            {tokens, d, 4 * d, layers, true},
                            {tokens, 4 * d, d, layers, true},
                            {tokens, d, vocab, 1, false}};
  const char* library = std::getenv("COIL_MATMUL_LIBRARY");
  std::printf("coil, %s, %s threads, %lld tokens\n", library ? library : "onednn",
              std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "default",
              static_cast<long long>(tokens));
  double total = 0;
  for (const Linear& l : linears) {
    Tensor x = randn({l.m, l.k}), w = randn({l.n, l.k}), b = randn({l.n}), dy = randn({l.m, l.n});
    const std::pair<const char*, std::function<Tensor()>> forms[] = {
        {"forward  x W^T", [&] { return l.bias ? addmm(b, x, w.t()) : mm(x, w.t()); }},
        {"grad x   dy W", [&] { return mm(dy, w); }},
        {"grad W   dy^T x", [&] { return mm(dy.t(), x); }}};
    for (const auto& [name, f] : forms) {
      const double s = timed(f);
      total += s * static_cast<double>(l.count);
      std::printf("%6lld x %5lld x %6lld %-16s %8.2f ms  %7.1f GFLOP/s  x%lld\n",
                  static_cast<long long>(l.m), static_cast<long long>(l.k),
                  static_cast<long long>(l.n), name, s * 1e3,
                  2.0 * static_cast<double>(l.m * l.k * l.n) / s / 1e9,
                  static_cast<long long>(l.count));
    }
  }
  std::printf("the step's linear-layer products: %.1f ms\n", total * 1e3);
}
