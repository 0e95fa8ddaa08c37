// Every convolution geometry of ResNet-50 (torchvision's v1.5, inference, float32) timed through
// coil's conv2d and as oneDNN's bare primitives on the same shapes: issue 24's "within 10 % of
// oneDNN's own time". oneDNN's own time is the faster of its two forms with nothing around the
// primitive — over the NCHW tensors as they are, or over the layouts it prefers with the
// operands already in them (the reorders a framework pays to get there are not counted). coil
// pays those reorders when it runs the second form (src/runtime/kernels/onednn_conv.cpp); over
// channels-last tensors (the "coil NHWC" column: input and weight contiguous(ChannelsLast), as
// a model converted with Module::to(MemoryFormat::ChannelsLast) runs) it pays none for the
// activations.
// Usage: conv_vs_onednn [batch] (bench/device_conv_vs_onednn.sh builds and runs it).
#include <dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include <coil/coil.h>

namespace {

double median_ms(const std::function<void()>& fn, int reps = 15) {
  for (int i = 0; i < 3; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Geometry {
  int64_t c, o, k, stride, hw, count;  // channels in/out, kernel, stride, input size, uses
};

// The bare primitive over `plain` layouts or those oneDNN prefers, its operands already there.
double onednn_ms(const Geometry& g, int64_t n, bool plain) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream st(eng);
  const int64_t pad = g.k / 2, out = (g.hw + 2 * pad - g.k) / g.stride + 1;
  dnnl::memory::desc x({n, g.c, g.hw, g.hw}, dt::f32, plain ? tag::nchw : tag::any);
  dnnl::memory::desc w({g.o, g.c, g.k, g.k}, dt::f32, plain ? tag::oihw : tag::any);
  dnnl::memory::desc y({n, g.o, out, out}, dt::f32, plain ? tag::nchw : tag::any);
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                    dnnl::algorithm::convolution_direct, x, w, y,
                                    {g.stride, g.stride}, {0, 0}, {pad, pad}, {pad, pad});
  dnnl::convolution_forward::primitive_desc pd(d, eng);
  dnnl::memory src(pd.src_desc(), eng), wei(pd.weights_desc(), eng), dst(pd.dst_desc(), eng);
  for (dnnl::memory* m : {&src, &wei}) {
    float* p = static_cast<float*>(m->get_data_handle());
    std::fill(p, p + m->get_desc().get_size() / sizeof(float), 0.5f);
  }
  dnnl::convolution_forward prim(pd);
  return median_ms([&] {
    prim.execute(st, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
    st.wait();
  });
}

}  // namespace

int main(int argc, char** argv) {
  using namespace coil;
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 16;
  const std::vector<Geometry> resnet50 = {
      {3, 64, 7, 2, 224, 1},    {64, 64, 1, 1, 56, 1},    {64, 64, 3, 1, 56, 3},
      {64, 256, 1, 1, 56, 4},   {256, 64, 1, 1, 56, 2},   {256, 128, 1, 1, 56, 1},
      {128, 128, 3, 2, 56, 1},  {128, 512, 1, 1, 28, 4},  {256, 512, 1, 2, 56, 1},
      {512, 128, 1, 1, 28, 3},  {128, 128, 3, 1, 28, 3},  {512, 256, 1, 1, 28, 1},
      {256, 256, 3, 2, 28, 1},  {256, 1024, 1, 1, 14, 6}, {512, 1024, 1, 2, 28, 1},
      {1024, 256, 1, 1, 14, 5}, {256, 256, 3, 1, 14, 5},  {1024, 512, 1, 1, 14, 1},
      {512, 512, 3, 2, 14, 1},  {512, 2048, 1, 1, 7, 3},  {1024, 2048, 1, 2, 14, 1},
      {2048, 512, 1, 1, 7, 2},  {512, 512, 3, 1, 7, 2},
  };
  std::printf(
      "ResNet-50's convolutions at batch %lld, float32 (ms; oneDNN's own = the faster "
      "bare form)\n",
      static_cast<long long>(n));
  std::printf("%-26s %4s %9s %9s %9s %9s %9s %7s %7s\n", "in -> out, k/stride @ size", "uses",
              "coil", "coil NHWC", "plain", "preferred", "own", "ratio", "NHWC");
  double coil_total = 0, nhwc_total = 0, own_total = 0;
  int within = 0, nhwc_within = 0;
  for (const Geometry& g : resnet50) {
    manual_seed(0);
    Tensor x = randn({n, g.c, g.hw, g.hw}), w = randn({g.o, g.c, g.k, g.k});
    const double coil_ms = median_ms([&] {
      conv2d(x, w, {}, {g.stride, g.stride}, {g.k / 2, g.k / 2});
    });
    Tensor xc = x.contiguous(MemoryFormat::ChannelsLast),
           wc = w.contiguous(MemoryFormat::ChannelsLast);
    const double nhwc_ms = median_ms([&] {
      conv2d(xc, wc, {}, {g.stride, g.stride}, {g.k / 2, g.k / 2});
    });
    const double plain = onednn_ms(g, n, true), preferred = onednn_ms(g, n, false);
    const double own = std::min(plain, preferred), ratio = coil_ms / own;
    coil_total += coil_ms * static_cast<double>(g.count);
    nhwc_total += nhwc_ms * static_cast<double>(g.count);
    own_total += own * static_cast<double>(g.count);
    within += ratio <= 1.10 ? 1 : 0;
    nhwc_within += nhwc_ms / own <= 1.10 ? 1 : 0;
    char name[64];
    std::snprintf(name, sizeof name, "%lld -> %lld, %lld/%lld @ %lld", (long long)g.c,
                  (long long)g.o, (long long)g.k, (long long)g.stride, (long long)g.hw);
    std::printf("%-26s %4lld %9.3f %9.3f %9.3f %9.3f %9.3f %6.2fx %6.2fx\n", name,
                (long long)g.count, coil_ms, nhwc_ms, plain, preferred, own, ratio, nhwc_ms / own);
  }
  std::printf(
      "whole network (each geometry times its uses): coil %.2f ms, oneDNN's own %.2f ms, "
      "%.2fx; %d of %zu geometries within 10 %%\n",
      coil_total, own_total, coil_total / own_total, within, resnet50.size());
  std::printf("channels-last: coil %.2f ms, %.2fx; %d of %zu geometries within 10 %%\n", nhwc_total,
              nhwc_total / own_total, nhwc_within, resnet50.size());
  return 0;
}
