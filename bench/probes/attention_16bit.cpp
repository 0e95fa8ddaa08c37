// coil's attention in bfloat16 on the GPU at issue 51's shapes (8 x 12 x 1024 x 64 and
// 4 x 32 x 4096 x 128, causal and not) and GPT-2's strided layout (heads of one [8, 1024, 2304]
// product): the forward alone, then forward and backward through eager autograd (the op
// scaled_dot_product_attention_backward). Device time by CUDA events, the median of 10 calls
// after 3; TFLOP/s counts 4 b h L S d for the forward (half that causal) and 2.5 times it for
// the backward. The first batch's output and gradients are checked against float64 on the CPU.
// bench/probes/torch_attention_16bit.py times PyTorch at the same shapes. With --profile, the
// profiler's table of one forward and backward after each shape's line.
//   g++ -std=c++20 -O2 -Iinclude bench/probes/attention_16bit.cpp -Lbuild -lcoil -o attention_16bit
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <coil/coil.h>
#include <coil/cuda.h>
#include <coil/profiler.h>

#include "device_timing.h"

using namespace coil;

namespace {

double error(const Tensor& got, const Tensor& want) {
  Tensor g = got.detach().cpu().to(kFloat64);
  return amax(abs(g - want)).item<double>() / std::max(1e-30, amax(abs(want)).item<double>());
}

bool g_profile = false;

void run(int64_t b, int64_t h, int64_t s, int64_t d, bool causal, bool strided) {
  const Device cuda("cuda");
  const DType t = kBFloat16;
  Tensor q, k, v;
  if (strided) {
    Tensor qkv = randn({b, s, 3 * h * d}).to(t).to(cuda);
    std::vector<Tensor> parts = split(qkv, h * d, 2);
    q = parts[0].view({b, s, h, d}).transpose(1, 2);
    k = parts[1].view({b, s, h, d}).transpose(1, 2);
    v = parts[2].view({b, s, h, d}).transpose(1, 2);
  } else {
    q = randn({b, h, s, d}).to(t).to(cuda), k = randn({b, h, s, d}).to(t).to(cuda);
    v = randn({b, h, s, d}).to(t).to(cuda);
  }
  const double fwd =
      median_device_ms([&] { scaled_dot_product_attention(q, k, v, {}, 0.0, causal); });
  const double flops = 4.0 * b * h * s * s * d * (causal ? 0.5 : 1.0);
  Tensor qg = q.detach(), kg = k.detach(), vg = v.detach();
  for (const Tensor& x : {qg, kg, vg}) x.requires_grad_();
  Tensor g = randn({b, h, s, d}).to(t).to(cuda);
  Tensor out;
  const double both = median_device_ms([&] {
    for (const Tensor& x : {qg, kg, vg}) x.set_grad(Tensor());
    out = scaled_dot_product_attention(qg, kg, vg, {}, 0.0, causal);
    out.backward(g);
  });
  if (g_profile) {
    Profiler p;
    for (const Tensor& x : {qg, kg, vg}) x.set_grad(Tensor());
    scaled_dot_product_attention(qg, kg, vg, {}, 0.0, causal).backward(g);
    std::printf("%s\n", p.table(20).c_str());
  }
  auto first = [](const Tensor& x) { return x.select(0, 0).detach().cpu().to(kFloat64); };
  Tensor q64 = first(q), k64 = first(k), v64 = first(v);
  for (const Tensor& x : {q64, k64, v64}) x.requires_grad_();
  Tensor o64 = scaled_dot_product_attention(q64, k64, v64, {}, 0.0, causal);
  o64.backward(first(g));
  std::printf(
      "coil %dx%dx%dx%d%s%s: forward %.3f ms (%.0f TFLOP/s), backward %.3f ms (%.0f TFLOP/s); "
      "error out %.1e dq %.1e dk %.1e dv %.1e\n",
      int(b), int(h), int(s), int(d), causal ? " causal" : "", strided ? " strided" : "", fwd,
      flops / fwd / 1e9, both - fwd, 2.5 * flops / (both - fwd) / 1e9,
      error(out.select(0, 0), o64.detach()), error(qg.grad().select(0, 0), q64.grad()),
      error(kg.grad().select(0, 0), k64.grad()), error(vg.grad().select(0, 0), v64.grad()));
}

}  // namespace

int main(int argc, char** argv) {
  g_profile = argc > 1 && std::string(argv[1]) == "--profile";
  manual_seed(0);
  for (bool causal : {false, true}) {
    run(8, 12, 1024, 64, causal, false);
    run(4, 32, 4096, 128, causal, false);
  }
  run(8, 12, 1024, 64, true, true);
}
