// train_mlp's five products on the GPU (Linear 1024 -> 4096 -> 1024 over 4096 rows: the forward's
// two, the backward's three), each alone, coil's eager matmul (cuBLASLt) timed by CUDA events, the
// median of 10 after 3; bench/probes/train_mlp_products.py times PyTorch's at the same shapes.
//   g++ -std=c++20 -O2 -Iinclude bench/probes/train_mlp_products.cpp -Lbuild -lcoil
#include <cstdio>
#include <functional>
#include <vector>

#include <coil/coil.h>
#include <coil/cuda.h>

#include "device_timing.h"

using namespace coil;

int main() {
  const Device cuda("cuda");
  Tensor x = randn({4096, 1024}).to(cuda), w1 = randn({4096, 1024}).to(cuda),
         w2 = randn({1024, 4096}).to(cuda), h = randn({4096, 4096}).to(cuda),
         g = randn({4096, 1024}).to(cuda), gh = randn({4096, 4096}).to(cuda);
  const std::vector<std::pair<const char*, std::function<Tensor()>>> products = {
      {"x w1^T   (forward 1)", [&] { return matmul(x, w1.t()); }},
      {"h w2^T   (forward 2)", [&] { return matmul(h, w2.t()); }},
      {"g^T h    (w2's grad)", [&] { return matmul(g.t(), h); }},
      {"g w2     (h's grad)", [&] { return matmul(g, w2); }},
      {"gh^T x   (w1's grad)", [&] { return matmul(gh.t(), x); }},
  };
  for (const auto& [name, f] : products)
    std::printf("coil  %-22s %.3f ms\n", name, median_device_ms([&] { f(); }));
}
