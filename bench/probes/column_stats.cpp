// The statistics a batch norm takes in training, over channels-last memory: per channel the
// mean and variance of [8, C, 56, 56] with the channels innermost (a reduction down C columns of
// 25088 rows), compiled, best of 30 calls after warm-up, for C = 64 and 256. Run with the
// libcoil of each commit to compare (docs/performance.md).
// Build: g++ -std=c++20 -O2 -Iinclude bench/probes/column_stats.cpp -Lbuild -lcoil
//        -Wl,-rpath,$PWD/build -o /tmp/column_stats
#include <algorithm>
#include <chrono>
#include <cstdio>

#include <coil/coil.h>

using namespace coil;

int main() {
  for (int64_t c : {64, 256}) {
    manual_seed(0);
    Tensor x = randn({8, 56, 56, c}).permute({0, 3, 1, 2});  // [8, c, 56, 56], channels-last
    auto stats = compile([](const Tensor& a) {
      return std::make_tuple(mean(a, {0, 2, 3}), var(a, {0, 2, 3}, 0.0));
    });
    for (int i = 0; i < 5; ++i) stats(x);
    double best = 1e30;
    for (int i = 0; i < 30; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      stats(x);
      best = std::min(
          best,
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("channels %4lld: %.3f ms\n", static_cast<long long>(c), best);
  }
}
