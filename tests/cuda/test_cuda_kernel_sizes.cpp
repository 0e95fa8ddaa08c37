// coil's hand-written GPU kernels and the generated reductions at the sizes models run at and at
// the edges of their tiling: sizes one below and above each tile, block and split threshold
// (attention's 64-row tiles, the reductions' split thresholds, cumsum's chunks), against float64
// references that take other code paths. scripts/test_gpu.sh runs them under memcheck too, where
// a read outside a tensor is an error rather than a wrong value.
#include <coil/coil.h>

#include "cuda_testing.h"
#include "runtime/cuda_runtime.h"
#include "testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

struct AttentionCase {
  int64_t batch, heads, tokens, head;
  bool causal;
  DType dtype;
};

std::string name_of(const ::testing::TestParamInfo<AttentionCase>& i) {
  const AttentionCase& c = i.param;
  return std::to_string(c.batch) + "x" + std::to_string(c.heads) + "x" + std::to_string(c.tokens) +
         "x" + std::to_string(c.head) + (c.causal ? "_causal_" : "_") + dtype_name(c.dtype);
}

class AttentionOnCuda : public ::testing::TestWithParam<AttentionCase> {};

// The forward (every dtype), and where the fused backward takes the case (float32, heads up to
// 64) its gradients, against attention by ops in float64.
TEST_P(AttentionOnCuda, MatchesFloat64) {
  COIL_REQUIRE_GPU();
  const AttentionCase c = GetParam();
  manual_seed(5);
  const Shape shape = {c.batch, c.heads, c.tokens, c.head};
  std::vector<Tensor> qkv64, qkv;
  for (int i = 0; i < 3; ++i) {
    Tensor t = random(shape, kFloat32, -1, 1).to(c.dtype).cuda();
    qkv.push_back(t.detach().requires_grad_());
    qkv64.push_back(t.to(kFloat64).requires_grad_());
  }
  Tensor y = scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], {}, 0.0, c.causal);
  Tensor want = attention_by_ops(qkv64[0], qkv64[1], qkv64[2], c.causal);
  const double rtol = c.dtype == kFloat32 ? 2e-5 : rtol_for(c.dtype);
  expect_near_largest(y, want, rtol, "the output");
  if (c.dtype != kFloat32 || c.head > cuda::kAttentionBackwardMaxHead) return;
  Tensor w = random(shape, kFloat64, -1, 1).cuda();
  (y * w.to(kFloat32)).sum().backward();
  (want * w).sum().backward();
  for (int i = 0; i < 3; ++i)
    expect_near_largest(qkv[i].grad(), qkv64[i].grad(), 1e-4, std::string("d") + "qkv"[i], 1e-6);
}

INSTANTIATE_TEST_SUITE_P(TileEdges, AttentionOnCuda,
                         ::testing::Values(AttentionCase{2, 3, 1, 64, true, kFloat32},
                                           AttentionCase{2, 3, 63, 64, true, kFloat32},
                                           AttentionCase{2, 3, 65, 64, false, kFloat32},
                                           AttentionCase{2, 3, 127, 64, true, kFloat32},
                                           AttentionCase{2, 3, 129, 64, false, kFloat32},
                                           AttentionCase{1, 2, 70, 1, true, kFloat32},
                                           AttentionCase{1, 2, 70, 63, false, kFloat32},
                                           AttentionCase{1, 2, 70, 65, true, kFloat32},
                                           AttentionCase{1, 2, 129, 127, false, kFloat32},
                                           AttentionCase{1, 2, 129, 128, true, kBFloat16},
                                           AttentionCase{1, 2, 65, 80, false, kFloat16}),
                         name_of);

INSTANTIATE_TEST_SUITE_P(ModelSizes, AttentionOnCuda,
                         ::testing::Values(AttentionCase{8, 12, 1024, 64, true, kFloat32},
                                           AttentionCase{8, 12, 2048, 64, false, kFloat32},
                                           AttentionCase{4, 12, 512, 64, true, kFloat32},
                                           AttentionCase{4, 32, 1024, 128, true, kBFloat16},
                                           AttentionCase{8, 12, 1024, 64, false, kFloat16}),
                         name_of);

// Max and average pooling, forward and backward, at ResNet's sizes and at odd ones (windows
// past the edge, dilation, ceil mode), against the CPU in float64.
TEST(CudaKernelSizes, PoolsMatchTheCpu) {
  COIL_REQUIRE_GPU();
  struct Case {
    Shape x, kernel, stride, padding, dilation;
    bool ceil;
  };
  const Case cases[] = {
      {{8, 64, 112, 112}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false},  // ResNet's stem
      {{2, 3, 7, 9}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, true},
      {{1, 5, 33, 31}, {3, 2}, {2, 1}, {1, 1}, {2, 1}, false},
      {{3, 1, 257, 255}, {5, 5}, {3, 3}, {2, 2}, {1, 1}, true},
  };
  // `pool` of x on the GPU against the CPU in float64, and its gradient of a random weighting.
  auto expect_pool = [](const Tensor& x, const std::function<Tensor(const Tensor&)>& pool,
                        double rtol, const std::string& what) {
    Tensor xg = x.cuda().requires_grad_(), xc = x.to(kFloat64).requires_grad_();
    Tensor y = pool(xg), want = pool(xc);
    expect_near_largest(y, want, rtol, what);
    Tensor g = random(want.sizes(), kFloat64);
    (y * g.to(kFloat32).cuda()).sum().backward();
    (want * g).sum().backward();
    expect_near_largest(xg.grad(), xc.grad(), 1e-6, what + "'s gradient");
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.x));
    manual_seed(6);
    Tensor x = random(c.x, kFloat32, -2, 2);
    expect_pool(
        x,
        [&](const Tensor& t) {
          return max_pool2d(t, c.kernel, c.stride, c.padding, c.dilation, c.ceil);
        },
        0, "max_pool2d");
    if (c.dilation != Shape{1, 1}) continue;
    expect_pool(
        x,
        [&](const Tensor& t) {
          return avg_pool2d(t, c.kernel, c.stride, c.padding, c.ceil, !c.ceil);
        },
        1e-6, "avg_pool2d");
  }
  // ResNet's head: 7 x 7 planes of 2048 channels to one value each.
  Tensor x = random({8, 2048, 7, 7});
  expect_near_largest(adaptive_avg_pool2d(x.cuda(), {1, 1}),
                      adaptive_avg_pool2d(x.to(kFloat64), {1, 1}), 1e-6, "adaptive_avg_pool2d");
}

// cumsum in one thread a line and in chunks (below and above a chunk's 64 elements, a
// vocabulary's 50257, a million), and scatter_add at an embedding gradient's size.
TEST(CudaKernelSizes, CumsumAndScatterAddMatchTheCpu) {
  COIL_REQUIRE_GPU();
  manual_seed(7);
  for (const Shape& s : {Shape{16384, 3}, Shape{5, 63}, Shape{5, 65}, Shape{3, 50257},
                         Shape{1, (1 << 20) + 1}, Shape{7, 129, 33}}) {
    Tensor x = random(s, kFloat32, -1, 1);
    for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d)
      expect_near_largest(cumsum(x.cuda(), d), cumsum(x.to(kFloat64), d), 1e-6,
                          "cumsum of " + shape_str(s) + " along " + std::to_string(d));
  }
  for (int64_t tokens : {4096, 4097, 255}) {
    Tensor index = randint(0, 50257, {tokens, 768});
    Tensor src = random({tokens, 768});
    Tensor base = zeros({50257, 768});
    expect_near_largest(scatter_add(base.cuda(), 0, index.cuda(), src.cuda()),
                        scatter_add(base.to(kFloat64), 0, index, src.to(kFloat64)), 1e-6,
                        "scatter_add of " + std::to_string(tokens) + " tokens");
  }
}

// The generated reductions around their split thresholds (a reduction to at most 1024 values of
// at least 8192 elements each is split; columns of 1024 rows or more are split in pieces) and at
// model sizes, compiled, against the CPU in float64.
TEST(CudaKernelSizes, ReductionsAroundTheirSplitsMatchTheCpu) {
  COIL_REQUIRE_GPU();
  manual_seed(8);
  auto sums = [](const Tensor& x) {
    return std::vector<Tensor>{x.sum({1}), x.sum({0}), x.amax({1}), x.var({0}, 1.0)};
  };
  auto compiled = compile(sums);
  for (const Shape& s : {Shape{1023, 8191}, Shape{1024, 8192}, Shape{1025, 8193}, Shape{4096, 768},
                         Shape{8192, 3}, Shape{3, (1 << 20) + 3}, Shape{1023, 1025}}) {
    Tensor x = random(s, kFloat32, -1, 1);
    const std::vector<Tensor> got = compiled(x.cuda()), want = sums(x.to(kFloat64));
    for (size_t i = 0; i < got.size(); ++i)
      expect_near_largest(got[i], want[i], 2e-5, shape_str(s) + ", reduction " + std::to_string(i));
  }
}

}  // namespace
