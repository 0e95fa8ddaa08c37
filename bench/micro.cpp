// coil-micro: the pieces of the matmul-bound workloads timed one by one (BLAS calls at the
// workloads' shapes, the fused softmax, the whole compiled program), to find where time goes.
//   coil-micro [--threads N]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <coil/coil.h>

using namespace coil;

namespace {

// One call of f, in milliseconds.
template <typename F>
double ms_of(F f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename F>
double median_ms(F f) {
  f();
  f();
  std::vector<double> v;
  for (int i = 0; i < 30; ++i) v.push_back(ms_of(f));
  return median(v);
}

// Medians of f and g called in turn, so that a shared machine's drift reaches both alike.
template <typename F, typename G>
std::pair<double, double> interleaved_ms(F f, G g, int reps = 300) {
  f();
  g();  // warm-up
  std::vector<double> a, b;
  for (int i = 0; i < reps; ++i) {
    a.push_back(ms_of(f));
    b.push_back(ms_of(g));
  }
  return {median(a), median(b)};
}

void row(const char* what, double ms, double flops = 0) {
  if (flops > 0)
    std::printf("  %-44s %9.3f ms  %7.1f GFLOP/s\n", what, ms, flops / (ms * 1e6));
  else
    std::printf("  %-44s %9.3f ms\n", what, ms);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--threads") omp_set_num_threads(std::atoi(argv[2]));
  std::printf("coil-micro: %d threads\n", omp_get_max_threads());

  std::printf("attention (2x4x256x64):\n");
  Tensor q = randn({8, 256, 64}), k = randn({8, 256, 64}), v = randn({8, 256, 64});
  Tensor s = randn({8, 256, 256}), kt = k.transpose(1, 2);
  double f1 = 2.0 * 8 * 256 * 256 * 64;
  row("bmm q @ k^T [8,256,64]x[8,64,256]", median_ms([&] { return bmm(q, kt); }), f1);
  row("bmm p @ v [8,256,256]x[8,256,64]", median_ms([&] { return bmm(s, v); }), f1);
  auto sm = compile([](const Tensor& x) { return softmax(x * 0.125, -1); });
  row("compiled softmax(s * 0.125) [8,256,256]", median_ms([&] { return sm(s); }));
  auto att = compile([](const Tensor& q, const Tensor& k, const Tensor& v) {
    return matmul(softmax(matmul(q, k.transpose(-2, -1)) * 0.125, -1), v);
  });
  Tensor q4 = q.reshape({2, 4, 256, 64}), k4 = k.reshape({2, 4, 256, 64}),
         v4 = v.reshape({2, 4, 256, 64});
  row("compiled attention", median_ms([&] { return att(q4, k4, v4); }), 2 * f1);
  // Scores of deviation 20: a sixth of their exps below FLT_MIN (subnormal numbers, which
  // the row softmax must not compute with).
  Tensor q_wide = q4 * 20.0;
  row("compiled attention, wide scores", median_ms([&] { return att(q_wide, k4, v4); }), 2 * f1);
  // The same with its scale as a tensor, which the attention pattern does not take: the
  // decomposed form, two library products around a generated softmax kernel.
  auto att_decomposed =
      compile([](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& s) {
        return matmul(softmax(matmul(q, k.transpose(-2, -1)) * s, -1), v);
      });
  Tensor scale = full({1}, 0.125);
  row("compiled attention, decomposed",
      median_ms([&] { return att_decomposed(q4, k4, v4, scale); }), 2 * f1);
  // The two forms taking turns call by call: the one eager call (flash-style row blocks where
  // each thread has few rows) against the batched products around a generated softmax.
  auto [one, two] = interleaved_ms([&] { return att(q4, k4, v4); },
                                   [&] { return att_decomposed(q4, k4, v4, scale); });
  row("in turns: compiled attention", one, 2 * f1);
  row("in turns: compiled attention, decomposed", two, 2 * f1);

  std::printf("mm_softmax (512x512):\n");
  Tensor a = randn({512, 512}), b = randn({512, 512}), ab = randn({512, 512});
  double f0 = 2.0 * 512 * 512 * 512;
  row("mm a @ b", median_ms([&] { return mm(a, b); }), f0);
  auto sm1 = compile([](const Tensor& x) { return softmax(x, 1); });
  row("compiled softmax(x, 1) [512,512]", median_ms([&] { return sm1(ab); }));
  auto mm_sm = compile([](const Tensor& a, const Tensor& b) { return softmax(mm(a, b), 1); });
  row("compiled mm_softmax", median_ms([&] { return mm_sm(a, b); }), f0);
  // Where the compiled program's time goes beyond its two pieces: the pieces called in turn
  // (eager mm, then the compiled softmax), and a compiled graph of the product alone.
  row("eager mm, then compiled softmax", median_ms([&] { return sm1(mm(a, b)); }), f0);
  auto mm_only = compile([](const Tensor& a, const Tensor& b) { return mm(a, b); });
  row("compiled mm alone", median_ms([&] { return mm_only(a, b); }), f0);
  // Whether the cost lies in the data (the softmax reading the product) or in handing the
  // threads from oneDNN to a generated kernel and back (a kernel that reads something else).
  auto twice = compile([](const Tensor& x) { return x * 2.0; });
  row("eager mm, then compiled x * 2 of it", median_ms([&] { return twice(mm(a, b)); }), f0);
  row("eager mm, then compiled x * 2 of another", median_ms([&] {
        return std::vector<Tensor>{mm(a, b), twice(ab)};
      }),
      f0);
  row("eager mm, twice", median_ms([&] {
        return std::vector<Tensor>{mm(a, b), mm(ab, b)};
      }),
      2 * f0);

  std::printf("mlp (2048x512, hidden 2048):\n");
  Tensor x = randn({2048, 512}), w1 = randn({2048, 512}), b1 = randn({2048}),
         w2 = randn({512, 2048}), b2 = randn({512}), h = randn({2048, 2048});
  double f2 = 2.0 * 2048 * 2048 * 512;
  row("mm x @ w1^T", median_ms([&] { return mm(x, w1.t()); }), f2);
  row("addmm b1 + x @ w1^T", median_ms([&] { return addmm(b1, x, w1.t()); }), f2);
  row("addmm b2 + h @ w2^T", median_ms([&] { return addmm(b2, h, w2.t()); }), f2);
  auto g = compile([](const Tensor& t) { return gelu(t); });
  row("compiled gelu [2048,2048]", median_ms([&] { return g(h); }));
  auto mlp = compile([](const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2,
                        const Tensor& b2) { return linear(gelu(linear(x, w1, b1)), w2, b2); });
  row("compiled mlp", median_ms([&] { return mlp(x, w1, b1, w2, b2); }), 2 * f2);

  std::printf("reductions over the outer dim of [2048,2048] (folded along memory):\n");
  auto col_mean = compile([](const Tensor& t) { return mean(t, {0}); });
  auto col_var = compile([](const Tensor& t) { return var(t, {0}); });
  row("compiled mean(x, 0)", median_ms([&] { return col_mean(h); }));
  row("compiled var(x, 0)", median_ms([&] { return col_var(h); }));
  row("eager var(x, 0)", median_ms([&] { return var(h, {0}); }));

  // One OpenMP runtime serves oneDNN, BLAS and the generated kernels: a second would show
  // as more threads than one team.
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Threads:", 0) == 0) std::printf("%s\n", line.c_str());
}
