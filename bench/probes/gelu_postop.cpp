// Does gelu cost less as oneDNN's eltwise post-op inside the product's kernel than as coil's
// generated kernel after it? mlp's first product (2048x512 @ 512x2048, the weight read
// transposed in place, a row bias), timed with and without the gelu_erf post-op; the
// difference is what the fused gelu costs, to set against the generated gelu kernel's time
// (coil-micro's "compiled gelu [2048,2048]").
//   g++ -O2 -fopenmp bench/probes/gelu_postop.cpp -o /tmp/gp -ldnnl && /tmp/gp
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <dnnl.hpp>
#include <utility>
#include <vector>

using namespace dnnl;

int main() {
  const int64_t M = 2048, K = 512, N = 2048;
  engine eng(engine::kind::cpu, 0);
  std::vector<float> a(M * K), w(N * K), bias(N, 0.1f), c(M * N);
  for (size_t i = 0; i < a.size(); ++i) a[i] = (i % 7) * 0.1f - 0.3f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = (i % 5) * 0.1f - 0.2f;
  // Min and median of 25 runs.
  auto run = [&](bool gelu) {
    memory::desc src({M, K}, memory::data_type::f32, memory::dims{K, 1});
    memory::desc wei({K, N}, memory::data_type::f32, memory::dims{1, K});
    memory::desc bia({1, N}, memory::data_type::f32, memory::dims{N, 1});
    memory::desc dst({M, N}, memory::data_type::f32, memory::dims{N, 1});
    primitive_attr attr;
    if (gelu) {
      post_ops ops;
      ops.append_eltwise(1.0f, algorithm::eltwise_gelu_erf, 0, 0);
      attr.set_post_ops(ops);
    }
    matmul::primitive_desc pd(matmul::desc(src, wei, bia, dst), attr, eng);
    matmul prim(pd);
    stream s(eng);
    memory ma(src, eng, a.data()), mw(wei, eng, w.data()), mb(bia, eng, bias.data()),
        mc(dst, eng, c.data());
    std::vector<double> t;
    for (int i = 0; i < 25; ++i) {
      double t0 = omp_get_wtime();
      prim.execute(
          s, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, mb}, {DNNL_ARG_DST, mc}});
      s.wait();
      t.push_back((omp_get_wtime() - t0) * 1e3);
    }
    std::sort(t.begin(), t.end());
    return std::make_pair(t[0], t[12]);
  };
  std::printf("gelu_postop: %d threads\n", omp_get_max_threads());
  for (int rep = 0; rep < 2; ++rep) {
    auto p = run(false), g = run(true);
    std::printf(
        "  product + bias %.3f ms (median %.3f) | with the gelu_erf post-op %.3f ms (median "
        "%.3f)\n",
        p.first, p.second, g.first, g.second);
  }
}
