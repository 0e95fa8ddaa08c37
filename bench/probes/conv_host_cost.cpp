// The host's time per eager call of coil's GPU convolution (bf16, channels-last, a problem so
// small that the GPU keeps up), beside a product and a pointwise op of the same size: where a
// compiled ResNet's call time sits above its work, this says how much of it the convolution's
// own call costs. Calls in a loop, the GPU waited for at the end.
// Usage: conv_host_cost
#include <chrono>
#include <cstdio>
#include <functional>

#include <coil/coil.h>

using namespace coil;

static double host_us(const std::function<void()>& f, int calls = 2000) {
  for (int i = 0; i < 200; ++i) f();
  cuda::synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) f();
  cuda::synchronize();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
         calls;
}

int main() {
  const Device cuda("cuda");
  manual_seed(0);
  const Tensor x =
      randn({1, 64, 8, 8}).to(cuda).to(kBFloat16).contiguous(MemoryFormat::ChannelsLast);
  const Tensor w =
      randn({64, 64, 3, 3}).to(cuda).to(kBFloat16).contiguous(MemoryFormat::ChannelsLast);
  const Tensor w1 = randn({64, 64, 1, 1}).to(cuda).to(kBFloat16);
  const Tensor a = randn({64, 64}).to(cuda).to(kBFloat16);
  NoGradGuard no_grad;
  std::printf("host us per call: conv2d 3x3 NHWC %.1f, conv2d 1x1 NHWC %.1f, mm %.1f, relu %.1f\n",
              host_us([&] {
                conv2d(x, w, Tensor(), {1, 1}, {1, 1});
              }),
              host_us([&] { conv2d(x, w1); }), host_us([&] { mm(a, a); }),
              host_us([&] { relu(x); }));
}
