// oneDNN's float32 matmul at the product forms of GPT-2 small's training step where it is slower
// than OpenBLAS (bench/probes/gpt2_products.cpp), beside forms where it is faster: which
// implementation it picks, and the time of the product described as coil describes it (a batch
// of one), as blocks of the result's columns, and as the transposed problem (C^T = B^T A^T).
// Built by -DCOIL_BUILD_PROBES=ON, or:
//   g++ -std=c++20 -O2 -fopenmp bench/probes/onednn_forms.cpp -ldnnl -o build/probes/onednn_forms
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <limits>
#include <vector>

#include <dnnl.hpp>

using namespace dnnl;
using Dims = memory::dims;

namespace {

engine eng(engine::kind::cpu, 0);

// rows x cols, element (i, j) at i * rs + j * cs, as a batch of one (coil's description).
memory::desc desc(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  return memory::desc(Dims{1, rows, cols}, memory::data_type::f32,
                      Dims{std::max(rows * rs, cols * cs), rs, cs});
}

struct Mat {
  int64_t rows, cols, rs, cs;
  float* p;
  Mat t() const { return {cols, rows, cs, rs, p}; }
  Mat cols_from(int64_t j, int64_t n) const { return {rows, n, rs, cs, p + j * cs}; }
};

double best_ms(const std::function<void()>& f) {
  f();
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < 3; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(
        best,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// C = A B as one primitive; returns its implementation's name.
struct Product {
  matmul::primitive_desc pd;
  matmul prim;
  Mat a, b, c;
  Product(Mat a_, Mat b_, Mat c_)
      : pd(matmul::desc(desc(a_.rows, a_.cols, a_.rs, a_.cs), desc(b_.rows, b_.cols, b_.rs, b_.cs),
                        desc(c_.rows, c_.cols, c_.rs, c_.cs)),
           eng),
        prim(pd),
        a(a_),
        b(b_),
        c(c_) {}
  void run(stream& s) const {
    prim.execute(s, {{DNNL_ARG_SRC, memory(pd.src_desc(), eng, a.p)},
                     {DNNL_ARG_WEIGHTS, memory(pd.weights_desc(), eng, b.p)},
                     {DNNL_ARG_DST, memory(pd.dst_desc(), eng, c.p)}});
    s.wait();
  }
};

void form(const char* name, int64_t m, int64_t k, int64_t n, bool a_trans, bool b_trans) {
  std::vector<float> av(m * k, 0.5f), bv(k * n, 0.25f), cv(m * n);
  const Mat a = a_trans ? Mat{k, m, m, 1, av.data()}.t() : Mat{m, k, k, 1, av.data()};
  const Mat b = b_trans ? Mat{n, k, k, 1, bv.data()}.t() : Mat{k, n, n, 1, bv.data()};
  const Mat c{m, n, n, 1, cv.data()};
  stream s(eng);
  const double flop = 2.0 * double(m) * double(k) * double(n);
  auto report = [&](const char* variant, double ms, const std::string& impl) {
    std::printf("%-18s %6lld x %5lld x %6lld %-22s %8.2f ms %7.1f GFLOP/s  %s\n", name,
                (long long)m, (long long)k, (long long)n, variant, ms, flop / ms / 1e6,
                impl.c_str());
  };
  try {
    Product p(a, b, c);
    report("as coil", best_ms([&] { p.run(s); }), p.pd.impl_info_str());
  } catch (const dnnl::error& e) {
    std::printf("%s: as coil: %s\n", name, e.what());
  }
  for (int64_t block : {768, 1536}) {
    if (n <= block || n % block) continue;
    std::vector<Product> parts;
    for (int64_t j = 0; j < n; j += block)
      parts.emplace_back(a, b.cols_from(j, block), c.cols_from(j, block));
    char variant[64];
    std::snprintf(variant, sizeof variant, "columns by %lld", (long long)block);
    report(variant, best_ms([&] {
             for (const Product& p : parts) p.run(s);
           }),
           parts[0].pd.impl_info_str());
  }
  {  // oneDNN's BLAS-like entry (row-major), its jit gemm
    const char ta = a.cs == 1 ? 'N' : 'T', tb = b.cs == 1 ? 'N' : 'T';
    const int64_t lda = a.cs == 1 ? a.rs : a.cs, ldb = b.cs == 1 ? b.rs : b.cs;
    dnnl_status_t status = dnnl_success;
    const double ms = best_ms(
        [&] { status = dnnl_sgemm(ta, tb, m, n, k, 1.0f, a.p, lda, b.p, ldb, 0.0f, c.p, n); });
    if (status == dnnl_success)
      report("dnnl_sgemm", ms, "gemm api");
    else
      std::printf("%s: dnnl_sgemm: status %d\n", name, int(status));
  }
  if (b.cs == 1) {  // B copied transposed first (the layout the forward's weights have)
    std::vector<float> bt(k * n);
    const Mat b_copy = Mat{n, k, k, 1, bt.data()}.t();
    Product p(a, b_copy, c);
    report("B transposed, copied", best_ms([&] {
#pragma omp parallel for
             for (int64_t j = 0; j < n; ++j)
               for (int64_t i = 0; i < k; ++i) bt[j * k + i] = b.p[i * b.rs + j];
             p.run(s);
           }),
           p.pd.impl_info_str());
  }
  try {
    Product p(b.t(), a.t(), c.t());
    const std::string impl = p.pd.impl_info_str();
    if (impl.rfind("ref", 0) == 0)  // the reference loops: minutes at these sizes
      std::printf("%s: transposed problem: %s, not timed\n", name, impl.c_str());
    else
      report("transposed problem", best_ms([&] { p.run(s); }), impl);
  } catch (const dnnl::error& e) {
    std::printf("%s: transposed problem: %s\n", name, e.what());
  }
}

// The jit gemm generates its kernels on a process's first call: its cost, before any other
// (after the OpenMP team has started, as it has in a coil process by then).
void first_jit_gemm_calls() {
  int team = 0;
#pragma omp parallel
  {
#pragma omp atomic
    team++;
  }
  for (int64_t n : {64, 64, 512}) {
    std::vector<float> a(n * n, 1.f), b(n * n, 1.f), c(n * n);
    auto t0 = std::chrono::steady_clock::now();
    dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    std::printf(
        "jit gemm %lld^3: %.2f ms\n", (long long)n,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::printf("oneDNN %d.%d, %d threads\n", dnnl_version()->major, dnnl_version()->minor,
              omp_get_max_threads());
  first_jit_gemm_calls();
  form("slow NN", 4096, 768, 3072, false, false);
  form("slow TN", 768, 4096, 3072, true, false);
  form("slow TN head", 50257, 4096, 768, true, false);
  form("NT forward", 4096, 768, 3072, false, true);
  form("NT forward qkv", 4096, 768, 2304, false, true);
  form("NN qkv", 4096, 2304, 768, false, false);
  form("TN qkv", 2304, 4096, 768, true, false);
  form("fast NN", 4096, 3072, 768, false, false);
  form("fast TN", 3072, 4096, 768, true, false);
  form("fast NN head", 4096, 50257, 768, false, false);
  // The CPU workloads' products (bench/workloads.cpp): mm_softmax, mlp, train_mlp.
  form("mm_softmax", 512, 512, 512, false, false);
  form("mlp 1", 2048, 512, 2048, false, true);
  form("mlp 2", 2048, 2048, 512, false, true);
  form("train_mlp fwd", 512, 256, 1024, false, true);
  form("train_mlp grad x", 512, 1024, 256, false, false);
  form("train_mlp grad W", 1024, 512, 256, true, false);
}
