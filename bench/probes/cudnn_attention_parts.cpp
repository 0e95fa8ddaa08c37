// cuDNN's fused attention graphs (backends/cuda/cudnn_attention.h) called alone in bfloat16, to
// see what the backward's time is made of: the forward without and with the rows' log-sum-exp,
// and the backward from it with the output's gradient laid out as the query (BHSD) or as the
// output (token-major, as an output projection's backward gives it) and with the gradients
// written contiguous [3, B, H, L, E] or as one [B, L, 3, H, E] projection (the op's layout).
// Device time by CUDA events, the median of 10 after 3.
//   g++ -std=c++20 -O2 -Iinclude -Isrc bench/probes/cudnn_attention_parts.cpp -Lbuild -lcoil \
//     -o cudnn_attention_parts
#include <cmath>
#include <cstdio>

#include <coil/coil.h>
#include <coil/cuda.h>

#include "backends/cuda/cudnn_attention.h"
#include "device_timing.h"

using namespace coil;

namespace {

void run(int64_t b, int64_t h, int64_t s, int64_t d, bool causal) {
  const Device cuda("cuda");
  auto make = [&] { return randn({b, h, s, d}).to(kBFloat16).to(cuda); };
  Tensor q = make(), k = make(), v = make();
  Tensor o = empty({b, s, h, d}, kBFloat16, cuda).transpose(1, 2);  // token-major, as the op's
  Tensor stats = empty({b, h, s}, kFloat32, cuda);
  const double scale = 1 / std::sqrt(static_cast<double>(d));
  const double flops = 4.0 * b * h * s * s * d * (causal ? 0.5 : 1.0);
  const double fwd =
      median_device_ms([&] { cuda::cudnn_attention(q, k, v, o, Tensor(), scale, causal); });
  const double fwd_stats =
      median_device_ms([&] { cuda::cudnn_attention(q, k, v, o, stats, scale, causal); });
  Tensor g_bhsd = make(), g_bshd = randn({b, s, h, d}).to(kBFloat16).to(cuda).transpose(1, 2);
  Tensor grads_apart = empty({3, b, h, s, d}, kBFloat16, cuda);
  Tensor grads_projection = empty({b, s, 3, h, d}, kBFloat16, cuda).permute({2, 0, 3, 1, 4});
  auto bwd = [&](const Tensor& g, const Tensor& grads) {
    bool ok = true;
    const double ms = median_device_ms([&] {
      ok = ok && cuda::cudnn_attention_backward(g, q, k, v, o, stats, grads, scale, causal);
    });
    return ok ? ms : -1.0;
  };
  const double a = bwd(g_bhsd, grads_apart), p = bwd(g_bhsd, grads_projection),
               ga = bwd(g_bshd, grads_apart), gp = bwd(g_bshd, grads_projection);
  std::printf(
      "%dx%dx%dx%d%s: forward %.3f ms (%.0f TFLOP/s), with stats %.3f; backward, dO BHSD: "
      "grads apart %.3f, as a projection %.3f; dO token-major: apart %.3f, projection %.3f ms "
      "(%.0f TFLOP/s)\n",
      int(b), int(h), int(s), int(d), causal ? " causal" : "", fwd, flops / fwd / 1e9, fwd_stats, a,
      p, ga, gp, 2.5 * flops / gp / 1e9);
}

}  // namespace

int main() {
  for (bool causal : {false, true}) {
    run(8, 12, 1024, 64, causal);
    run(4, 32, 4096, 128, causal);
  }
  for (const std::string& line : cuda::cudnn_attention_graphs()) std::printf("%s\n", line.c_str());
}
