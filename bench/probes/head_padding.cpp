// The tied head of GPT-2's forward, [tokens, 768] x [50257, 768]^T in bf16, with the vocabulary
// dimension N as given and padded: which layout of the weight and the result lets cuBLASLt run
// the product at the tensor cores' speed (an odd N leaves the result's rows unaligned). Also the
// cost of the weight's cast in each layout. Device time, CUDA events (device_timing.h).
// Usage: head_padding [tokens]
#include <cstdio>
#include <cstdlib>

#include <coil/coil.h>

#include "device_timing.h"

using namespace coil;

int main(int argc, char** argv) {
  const int64_t m = argc > 1 ? std::atoll(argv[1]) : 4096, k = 768, n = 50257;
  const Device cuda("cuda");
  manual_seed(0);
  const Tensor x = randn({m, k}).to(cuda).to(kBFloat16);
  const Tensor master = randn({n, k}).to(cuda);  // float32 weight, as autocast casts it
  const Tensor w = master.to(kBFloat16);
  auto tflops = [&](double ms) { return 2.0 * m * n * k / (ms * 1e-3) / 1e12; };
  auto row = [&](const char* what, double ms) {
    std::printf("  %-58s %8.3f ms  %6.1f TFLOP/s\n", what, ms, tflops(ms));
  };
  std::printf("head product %lld x %lld x %lld, bf16\n", (long long)m, (long long)k, (long long)n);
  row("x w^T, N = 50257, w [N, K]", median_device_ms([&] { mm(x, w.t()); }));
  for (int64_t pad : {8, 64, 128}) {
    const int64_t np = (n + pad - 1) / pad * pad;
    Tensor wp = zeros({np, k}, kBFloat16, cuda);
    wp.narrow(0, 0, n).copy_(w);
    Tensor wt = wp.t().contiguous();  // [K, Np], the transposed layout
    char what[128];
    std::snprintf(what, sizeof what, "x wp^T, N padded to %lld (x%lld), wp [Np, K]", (long long)np,
                  (long long)pad);
    row(what, median_device_ms([&] { mm(x, wp.t()).narrow(1, 0, n); }));
    std::snprintf(what, sizeof what, "x wt,   N padded to %lld (x%lld), wt [K, Np]", (long long)np,
                  (long long)pad);
    row(what, median_device_ms([&] { mm(x, wt).narrow(1, 0, n); }));
  }
  const Tensor xf = x.to(kFloat32), wf = w.to(kFloat32);
  Tensor wf8 = zeros({50264, k}, kFloat32, cuda);
  wf8.narrow(0, 0, n).copy_(wf);
  row("float32: x w^T, N = 50257", median_device_ms([&] { mm(xf, wf.t()); }));
  row("float32: x wp^T, N padded to 50264", median_device_ms([&] { mm(xf, wf8.t()); }));
  std::printf("the weight's cast (float32 -> bf16)\n");
  std::printf("  %-58s %8.3f ms\n", "[N, K] -> [N, K]",
              median_device_ms([&] { master.to(kBFloat16); }));
  const Tensor tp = empty({k, 50304}, kBFloat16, cuda);
  std::printf("  %-58s %8.3f ms\n", "[N, K] -> [K, Np] (transposed, padded)",
              median_device_ms([&] { tp.narrow(1, 0, n).copy_(master.t()); }));
}
