// float32 products of at least 2^32 multiply-adds, which take oneDNN's jit gemm instead of its
// brgemm kernels (runtime/kernels/onednn_matmul.cpp), in the three forms a linear layer's
// training step calls: x W^T + b, dy W and dy^T x, and a result added into what the output held.
// Checked against float64 dot products at a sample of entries.
#include "testing.h"

using namespace coil;
namespace ct = coil::testing;

namespace {

// got[i, j] against the float64 dot product of a's row i and b's column j at entries spread
// over the whole result (every row block and column block a kernel could split it into), plus
// bias[j] and base[i, j] where given.
void expect_entries(const Tensor& got, const Tensor& a, const Tensor& b,
                    const Tensor* bias = nullptr, const Tensor* base = nullptr) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  ASSERT_EQ(got.sizes(), (Shape{m, n}));
  const std::vector<double> pa = ct::values(a.contiguous()), pb = ct::values(b.contiguous()),
                            pg = ct::values(got), pbias = bias ? ct::values(*bias) : pg,
                            pbase = base ? ct::values(*base) : pg;
  for (int64_t s = 0; s < 97; ++s) {
    const int64_t i = (s * 7919) % m, j = (s * 104729) % n;
    double want = 0;
    for (int64_t p = 0; p < k; ++p) want += pa[i * k + p] * pb[p * n + j];
    if (bias) want += pbias[j];
    if (base) want += pbase[i * n + j];
    // k terms of size up to 4 each, summed in float32: the error grows with sqrt(k) at random.
    EXPECT_NEAR(pg[i * n + j], want, 2e-3 + 1e-5 * std::abs(want)) << "entry " << i << ", " << j;
  }
}

}  // namespace

TEST(LargeProducts, EveryFormOfALinearLayersStepMatchesFloat64) {
  const int64_t rows = 4096, in = 1024, out = 1024;  // rows * in * out = 2^32
  const Tensor x = ct::random({rows, in}), w = ct::random({out, in}), b = ct::random({out});
  const Tensor dy = ct::random({rows, out});
  {
    SCOPED_TRACE("forward: x W^T + b");
    expect_entries(addmm(b, x, w.t()), x, w.t(), &b);
  }
  {
    SCOPED_TRACE("input gradient: dy W");
    expect_entries(mm(dy, w), dy, w);
  }
  {
    SCOPED_TRACE("weight gradient: dy^T x");
    expect_entries(mm(dy.t(), x), dy.t(), x);
  }
  {
    SCOPED_TRACE("added into a whole matrix: base + x W^T (oneDNN's sum post-op)");
    const Tensor base = ct::random({rows, out});
    expect_entries(addmm(base, x, w.t()), x, w.t(), nullptr, &base);
  }
}
