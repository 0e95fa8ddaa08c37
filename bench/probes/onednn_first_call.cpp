// Where oneDNN's first-call cost goes: the OpenMP team's start, creating a matmul primitive,
// and its first and second executions, for a few shapes in one process. Built and run by
// bench/device_matmul_library.sh (and by -DCOIL_BUILD_PROBES=ON).
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include <dnnl.hpp>

using namespace dnnl;

namespace {

double now_ms() {
  static const auto start = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

void product(engine& eng, stream& s, memory::dim m, memory::dim n, memory::dim k) {
  using tag = memory::format_tag;
  memory::desc a({1, m, k}, memory::data_type::f32, tag::abc);
  memory::desc b({1, k, n}, memory::data_type::f32, tag::abc);
  memory::desc c({1, m, n}, memory::data_type::f32, tag::abc);
  double t0 = now_ms();
  matmul::primitive_desc pd(matmul::desc(a, b, c), eng);
  matmul p(pd);
  double t1 = now_ms();
  std::vector<float> av(m * k, 1.f), bv(k * n, 1.f), cv(m * n);
  memory ma(a, eng, av.data()), mb(b, eng, bv.data()), mc(c, eng, cv.data());
  double t2 = now_ms();
  p.execute(s, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
  s.wait();
  double t3 = now_ms();
  p.execute(s, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
  s.wait();
  std::printf("  %4ldx%4ldx%4ld  create %7.2f ms  exec1 %7.2f ms  exec2 %7.2f ms\n", long(m),
              long(n), long(k), t1 - t0, t3 - t2, now_ms() - t3);
}

}  // namespace

int main() {
  std::printf("threads %d\n", omp_get_max_threads());
  double t0 = now_ms();
  int team = 0;
#pragma omp parallel
  {
#pragma omp atomic
    team++;
  }
  std::printf("  first parallel region (%d threads) %.2f ms\n", team, now_ms() - t0);
  t0 = now_ms();
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  std::printf("  engine + stream %.2f ms\n", now_ms() - t0);
  product(eng, s, 64, 64, 64);
  product(eng, s, 512, 512, 512);
  product(eng, s, 512, 512, 512);
  product(eng, s, 2048, 2048, 512);
  product(eng, s, 2048, 512, 2048);
  product(eng, s, 256, 256, 64);
}
