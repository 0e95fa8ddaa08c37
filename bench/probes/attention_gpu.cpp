// coil's attention on the GPU at GPT-2 small's training shape (8 x 12 heads x 512 x 64, causal)
// and at the attention workload's (8 x 12 x 1024 x 64, no mask): the forward kernel alone, with
// q, k and v contiguous and as GPT-2 makes them (heads of one [8, 512, 2304] product, strided),
// then forward and backward through eager autograd (the backward is the rule's batched products
// and row kernels). Device time by CUDA events, the median of 10 calls after 3; the outputs and
// gradients checked against float64 on the CPU. bench/probes/torch_attention.py times PyTorch's
// scaled_dot_product_attention at the same shapes.
//   g++ -std=c++20 -O2 -Iinclude bench/probes/attention_gpu.cpp -Lbuild -lcoil -o attention_gpu
#include <algorithm>
#include <cstdio>
#include <vector>

#include <coil/coil.h>
#include <coil/cuda.h>

#include "device_timing.h"

using namespace coil;

namespace {

double error(const Tensor& got, const Tensor& want) {
  Tensor g = got.detach().cpu().to(kFloat64);
  return amax(abs(g - want)).item<double>() / std::max(1.0, amax(abs(want)).item<double>());
}

void run(const char* label, int64_t b, int64_t h, int64_t s, int64_t d, bool causal, bool strided) {
  const Device cuda("cuda");
  Tensor q, k, v;
  if (strided) {  // GPT-2: one product's columns split into q, k, v, then viewed as heads
    Tensor qkv = randn({b, s, 3 * h * d}).to(cuda);
    std::vector<Tensor> parts = split(qkv, h * d, 2);
    q = parts[0].view({b, s, h, d}).transpose(1, 2);
    k = parts[1].view({b, s, h, d}).transpose(1, 2);
    v = parts[2].view({b, s, h, d}).transpose(1, 2);
  } else {
    q = randn({b, h, s, d}).to(cuda), k = randn({b, h, s, d}).to(cuda);
    v = randn({b, h, s, d}).to(cuda);
  }
  const double fwd =
      median_device_ms([&] { scaled_dot_product_attention(q, k, v, {}, 0.0, causal); });
  const double flops = 4.0 * b * h * s * s * d * (causal ? 0.5 : 1.0);
  Tensor qg = q.detach(), kg = k.detach(), vg = v.detach();
  for (const Tensor& t : {qg, kg, vg}) t.requires_grad_();
  Tensor g = randn({b, h, s, d}).to(cuda);
  Tensor out;
  const double both = median_device_ms([&] {
    for (const Tensor& t : {qg, kg, vg}) t.set_grad(Tensor());
    out = scaled_dot_product_attention(qg, kg, vg, {}, 0.0, causal);
    out.backward(g);
  });
  // float64 on the CPU, one head's worth of batches to keep it short: the first batch.
  auto first = [](const Tensor& t) { return t.select(0, 0).detach().cpu().to(kFloat64); };
  Tensor q64 = first(q), k64 = first(k), v64 = first(v);
  for (const Tensor& t : {q64, k64, v64}) t.requires_grad_();
  Tensor o64 = scaled_dot_product_attention(q64, k64, v64, {}, 0.0, causal);
  o64.backward(first(g));
  std::printf(
      "%-34s forward %.3f ms (%.1f TFLOP/s), forward+backward %.3f ms (backward %.3f ms); "
      "error out %.1e dq %.1e dk %.1e dv %.1e\n",
      label, fwd, flops / fwd / 1e9, both, both - fwd, error(out.select(0, 0), o64.detach()),
      error(qg.grad().select(0, 0), q64.grad()), error(kg.grad().select(0, 0), k64.grad()),
      error(vg.grad().select(0, 0), v64.grad()));
}

}  // namespace

int main() {
  manual_seed(0);
  run("gpt2 8x12x512x64 causal", 8, 12, 512, 64, true, false);
  run("gpt2 8x12x512x64 causal, strided", 8, 12, 512, 64, true, true);
  run("8x12x512x64 no mask", 8, 12, 512, 64, false, false);
  run("8x12x1024x64 no mask (workload)", 8, 12, 1024, 64, false, false);
}
