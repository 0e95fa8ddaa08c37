// conv2d, max_pool2d, avg_pool2d and adaptive_avg_pool2d against float64 references computed
// here with plain loops over (N, C, H, W).
#include <cmath>
#include <limits>

#include "graph/registry.h"
#include "runtime/kernels/onednn_conv.h"
#include "testing.h"

using namespace coil;
namespace ct = coil::testing;
using coil::testing::noncontiguous;
using coil::testing::random;
using coil::testing::values;

namespace {

struct Conv {
  Shape stride{1, 1}, padding{0, 0}, dilation{1, 1};
  int64_t groups = 1;
};

// Runs `body` once per form of oneDNN's convolutions (over the tensors' own layouts, over the
// layouts oneDNN prefers, the faster by timing): each must be right on its own.
template <typename F>
void in_each_form(F&& body) {
  struct Restore {
    ~Restore() { set_onednn_conv_form(ConvForm::fastest); }
  } restore;
  for (auto [form, name] : {std::pair{ConvForm::plain, "plain layouts"},
                            {ConvForm::preferred, "preferred layouts"},
                            {ConvForm::fastest, "the faster"}}) {
    SCOPED_TRACE(name);
    set_onednn_conv_form(form);
    body();
  }
}
// Direct convolution: out[n][o][y][x] = b[o] + sum over the group's channels and taps.
std::vector<double> ref_conv(const Tensor& x4, const Tensor& w, const Tensor& b, const Conv& c,
                             Shape* sizes) {
  int64_t N = x4.size(0), C = x4.size(1), H = x4.size(2), W = x4.size(3);
  int64_t O = w.size(0), Cg = w.size(1), KH = w.size(2), KW = w.size(3);
  int64_t OH = (H + 2 * c.padding[0] - c.dilation[0] * (KH - 1) - 1) / c.stride[0] + 1;
  int64_t OW = (W + 2 * c.padding[1] - c.dilation[1] * (KW - 1) - 1) / c.stride[1] + 1;
  std::vector<double> xv = values(x4), wv = values(w), bv;
  if (b.defined()) bv = values(b);
  *sizes = {N, O, OH, OW};
  std::vector<double> out;
  int64_t Og = O / c.groups;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t y = 0; y < OH; ++y)
        for (int64_t x = 0; x < OW; ++x) {
          double s = b.defined() ? bv[o] : 0.0;
          int64_t g = o / Og;
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t i = 0; i < KH; ++i)
              for (int64_t j = 0; j < KW; ++j) {
                int64_t iy = y * c.stride[0] - c.padding[0] + i * c.dilation[0];
                int64_t ix = x * c.stride[1] - c.padding[1] + j * c.dilation[1];
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                int64_t ch = g * Cg + ci;
                s += xv[((n * C + ch) * H + iy) * W + ix] * wv[((o * Cg + ci) * KH + i) * KW + j];
              }
          out.push_back(s);
        }
  return out;
}

Tensor call_conv(const Tensor& x, const Tensor& w, const Tensor& b, const Conv& c) {
  return conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
}

double conv_atol(DType dt, int64_t terms) { return ct::rtol_for(dt) * 4 * terms; }

}  // namespace

TEST(Conv2d, StridePaddingDilationGroupsAndBias) {
  struct Case {
    Shape x, w;
    Conv c;
  };
  std::vector<Case> cases = {
      {{2, 3, 7, 9}, {4, 3, 3, 3}, {}},
      {{2, 3, 7, 9}, {4, 3, 3, 2}, {{2, 1}, {1, 0}, {1, 1}, 1}},
      {{1, 4, 9, 8}, {6, 2, 3, 3}, {{1, 2}, {2, 1}, {2, 1}, 2}},
      {{3, 4, 5, 5}, {4, 1, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 4}},  // depthwise
      {{2, 6, 6, 6}, {3, 6, 1, 1}, {}},                           // 1x1: no unfold
      {{2, 6, 6, 6}, {4, 3, 1, 1}, {{2, 2}, {0, 0}, {1, 1}, 2}},
      {{1, 1, 1, 1}, {1, 1, 1, 1}, {}},
      {{2, 2, 4, 4}, {2, 2, 4, 4}, {{1, 1}, {3, 3}, {1, 1}, 1}},  // padding wider than input
      {{1, 3, 17, 5}, {1, 3, 5, 1}, {{3, 1}, {2, 0}, {3, 1}, 1}},
  };
  in_each_form([&] {
    for (const Case& t : cases) {
      for (bool with_bias : {false, true}) {
        SCOPED_TRACE(shape_str(t.x) + " * " + shape_str(t.w) + " stride " + shape_str(t.c.stride) +
                     " pad " + shape_str(t.c.padding) + " dil " + shape_str(t.c.dilation) +
                     " groups " + std::to_string(t.c.groups) + (with_bias ? " bias" : ""));
        Tensor x = random(t.x), w = random(t.w);
        Tensor b = with_bias ? random({t.w[0]}) : Tensor();
        Shape sizes;
        std::vector<double> want = ref_conv(x, w, b, t.c, &sizes);
        int64_t terms = t.w[1] * t.w[2] * t.w[3];
        ct::expect_close(call_conv(x, w, b, t.c), want, sizes, 1e-5, conv_atol(kFloat32, terms));
        ct::expect_close(call_conv(noncontiguous(x), noncontiguous(w), b, t.c), want, sizes, 1e-5,
                         conv_atol(kFloat32, terms));
      }
    }
  });
}

TEST(Conv2d, EveryFloatingDtype) {
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = random({2, 4, 6, 5}, dt), w = random({6, 2, 3, 3}, dt), b = random({6}, dt);
    Conv c{{1, 2}, {1, 1}, {1, 1}, 2};
    Shape sizes;
    std::vector<double> want = ref_conv(x, w, b, c, &sizes);
    Tensor got = call_conv(x, w, b, c);
    EXPECT_EQ(got.dtype(), dt);
    ct::expect_close(got, want, sizes, ct::rtol_for(dt), conv_atol(dt, 18));
  }
}

TEST(Conv2d, UnbatchedSingleIntParamsAndEmptyBatch) {
  Tensor x = random({3, 6, 7}), w = random({2, 3, 3, 3}), b = random({2});
  Conv c{{2, 2}, {1, 1}, {1, 1}, 1};
  Shape sizes;
  std::vector<double> want = ref_conv(x.unsqueeze(0), w, b, c, &sizes);
  // One int stands for both spatial dims, as in torch.
  Tensor got = conv2d(x, w, b, {2}, {1}, {1});
  ct::expect_close(got, want, {sizes[1], sizes[2], sizes[3]}, 1e-5, 1e-4);
  EXPECT_EQ(conv2d(zeros({0, 3, 6, 7}), w).sizes(), (Shape{0, 2, 4, 5}));
}

TEST(Conv2d, LargeBatchesTakeTheParallelPath) {
  Tensor x = random({4, 8, 12, 12}), w = random({8, 8, 3, 3}), b = random({8});
  Conv c{{1, 1}, {1, 1}, {1, 1}, 1};
  Shape sizes;
  std::vector<double> want = ref_conv(x, w, b, c, &sizes);
  ct::expect_close(call_conv(x, w, b, c), want, sizes, 1e-5, conv_atol(kFloat32, 72));
}

namespace {

// The gradients of sum(g * conv2d(x, w)) for x and w, each output element's gradient sent back
// along the taps that made it.
void ref_conv_grads(const Tensor& x4, const Tensor& w, const Tensor& g, const Conv& c,
                    std::vector<double>* dx, std::vector<double>* dw) {
  int64_t N = x4.size(0), C = x4.size(1), H = x4.size(2), W = x4.size(3);
  int64_t O = w.size(0), Cg = w.size(1), KH = w.size(2), KW = w.size(3);
  int64_t OH = g.size(2), OW = g.size(3), Og = O / c.groups;
  std::vector<double> xv = values(x4), wv = values(w), gv = values(g);
  dx->assign(xv.size(), 0.0);
  dw->assign(wv.size(), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t y = 0; y < OH; ++y)
        for (int64_t x = 0; x < OW; ++x) {
          double gy = gv[((n * O + o) * OH + y) * OW + x];
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t i = 0; i < KH; ++i)
              for (int64_t j = 0; j < KW; ++j) {
                int64_t iy = y * c.stride[0] - c.padding[0] + i * c.dilation[0];
                int64_t ix = x * c.stride[1] - c.padding[1] + j * c.dilation[1];
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                int64_t xi = ((n * C + (o / Og) * Cg + ci) * H + iy) * W + ix;
                int64_t wi = ((o * Cg + ci) * KH + i) * KW + j;
                (*dx)[xi] += gy * wv[wi];
                (*dw)[wi] += gy * xv[xi];
              }
        }
}

}  // namespace

// conv2d's gradients (its backward ops, through its derivative rule) against the adjoint
// computed tap by tap.
TEST(Conv2d, GradientsOfInputAndWeight) {
  struct Case {
    Shape x, w;
    Conv c;
  };
  std::vector<Case> cases = {
      {{2, 3, 7, 9}, {4, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}},
      {{2, 3, 8, 9}, {4, 3, 3, 2}, {{2, 3}, {1, 0}, {1, 1}, 1}},  // rows no window reaches
      {{1, 4, 9, 8}, {6, 2, 3, 3}, {{1, 2}, {2, 1}, {2, 1}, 2}},
      {{3, 4, 5, 5}, {4, 1, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 4}},    // depthwise
      {{2, 6, 6, 6}, {4, 3, 1, 1}, {{1, 1}, {0, 0}, {1, 1}, 2}},    // 1x1: no unfold
      {{4, 8, 12, 12}, {8, 8, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}},  // the parallel path
  };
  in_each_form([&] {
    for (const Case& t : cases) {
      for (DType dt : {kFloat32, kFloat64}) {
        SCOPED_TRACE(shape_str(t.x) + " * " + shape_str(t.w) + " stride " + shape_str(t.c.stride) +
                     " groups " + std::to_string(t.c.groups) + " " + dtype_name(dt));
        Tensor x = random(t.x, dt).requires_grad_(), w = random(t.w, dt).requires_grad_();
        Tensor y = call_conv(x, w, {}, t.c);
        Tensor g = random(y.sizes(), dt);
        (y * g).sum().backward();
        std::vector<double> dx, dw;
        ref_conv_grads(x, w, g, t.c, &dx, &dw);
        const int64_t terms = t.w[0] * y.size(2) * y.size(3);
        ct::expect_close(x.grad(), dx, t.x, ct::rtol_for(dt), conv_atol(dt, terms));
        ct::expect_close(w.grad(), dw, t.w, ct::rtol_for(dt),
                         conv_atol(dt, t.x[0] * y.size(2) * y.size(3)));
      }
    }
  });
}

// bfloat16 and float16 convolutions run in their own dtype where the CPU has oneDNN kernels for
// them (else in float32 copies): either way each result is a float32 sum rounded once, so it is
// within the dtype's rounding of the float64 result, in both layouts and both directions.
TEST(Conv2d, SixteenBitResultsAndGradientsAreRoundedOnce) {
  const Conv c{{1, 1}, {1, 1}, {1, 1}, 1};
  in_each_form([&] {
    for (DType dt : {kBFloat16, kFloat16}) {
      for (MemoryFormat f : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) +
                     (f == MemoryFormat::ChannelsLast ? " channels-last" : " NCHW"));
        Tensor x = random({2, 16, 9, 11}, dt).contiguous(f).requires_grad_();
        Tensor w = random({32, 16, 3, 3}, dt).contiguous(f).requires_grad_();
        Tensor b = random({32}, dt);
        Tensor y = call_conv(x, w, b, c);
        EXPECT_EQ(y.dtype(), dt);
        Shape sizes;
        const double tol = ct::rtol_for(dt);
        ct::expect_close(y, ref_conv(x, w, b, c, &sizes), sizes, tol, tol);
        Tensor g = random(y.sizes(), dt);
        (y * g).sum().backward();
        std::vector<double> dx, dw;
        ref_conv_grads(x, w, g, c, &dx, &dw);
        ct::expect_close(x.grad(), dx, x.sizes(), tol, tol);
        ct::expect_close(w.grad(), dw, w.sizes(), tol, tol);
      }
    }
  });
}

TEST(Conv2d, BackwardOpsCheckTheirGradient) {
  Tensor x = ones({1, 4, 5, 5}), w = ones({2, 4, 3, 3});
  auto input_backward = [&](const Tensor& g) {
    return call_op1(OpId::conv2d_input_backward,
                    {g, x, w, Shape{1, 1}, Shape{0, 0}, Shape{1, 1}, int64_t{1}});
  };
  EXPECT_EQ(input_backward(ones({1, 2, 3, 3})).sizes(), x.sizes());
  EXPECT_COIL_ERROR(input_backward(ones({1, 2, 4, 4})),
                    "does not have conv2d's output sizes [1, 2, 3, 3]");
  EXPECT_COIL_ERROR(input_backward(ones({1, 2, 3, 3}, kFloat64)), "must have the input's dtype");
  EXPECT_COIL_ERROR(
      call_op1(OpId::conv2d_weight_backward, {ones({2, 3, 3}), x.squeeze(0), w, Shape{1, 1},
                                              Shape{0, 0}, Shape{1, 1}, int64_t{1}}),
      "expected a 4-D (N, C, H, W) input");
}

TEST(Conv2d, Errors) {
  Tensor x = ones({1, 4, 5, 5});
  EXPECT_COIL_ERROR(conv2d(x, ones({2, 3, 3, 3})), "expects an input with 3 channels");
  EXPECT_COIL_ERROR(conv2d(x, ones({3, 2, 3, 3}), {}, {1, 1}, {0, 0}, {1, 1}, 2),
                    "must be divisible by groups");
  EXPECT_COIL_ERROR(conv2d(x, ones({2, 4, 6, 6})), "smaller than the dilated kernel");
  EXPECT_COIL_ERROR(conv2d(x, ones({2, 4, 3, 3}), {}, {1, 1}, {0, 0}, {3, 3}),
                    "smaller than the dilated kernel");
  EXPECT_COIL_ERROR(conv2d(ones({4, 5}), ones({2, 4, 3, 3})), "3-D (C, H, W) or 4-D");
  EXPECT_COIL_ERROR(conv2d(x, ones({2, 4, 3})), "4-D weight");
  EXPECT_COIL_ERROR(conv2d(x, ones({2, 4, 3, 3}), ones({3})), "bias must be 1-D with 2");
  EXPECT_COIL_ERROR(conv2d(x, ones({2, 4, 3, 3}, kFloat64)), "same dtype");
  EXPECT_COIL_ERROR(conv2d(x.to(kInt64), ones({2, 4, 3, 3}, kInt64)), "floating-point");
  EXPECT_COIL_ERROR(conv2d(x, ones({2, 4, 3, 3}), {}, {0, 1}), "stride must be positive");
  EXPECT_COIL_ERROR(conv2d(x, ones({2, 4, 3, 3}), {}, {1, 1}, {1, 1, 1}), "padding must be one");
  EXPECT_COIL_ERROR(conv2d(x, ones({2, 4, 3, 3}), {}, {1, 1}, {0, 0}, {1, 1}, 0),
                    "groups must be positive");
}

// ---- pooling
// -------------------------------------------------------------------------------------

namespace {

struct Pool {
  Shape kernel, stride, padding{0, 0}, dilation{1, 1};
  bool ceil_mode = false;
};

int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  int64_t num = in + 2 * p - d * (k - 1) - 1;
  int64_t out = (ceil_mode ? (num + s - 1) / s : num / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

// Max or average pooling over the planes of a (.., H, W) tensor, per torch's definitions.
std::vector<double> ref_pool(const Tensor& x, const Pool& p, bool is_max, bool include_pad,
                             Shape* sizes) {
  int64_t H = x.size(-2), W = x.size(-1), planes = x.numel() / (H * W);
  Shape st = p.stride.empty() ? p.kernel : p.stride;
  int64_t OH = pool_out(H, p.kernel[0], st[0], p.padding[0], p.dilation[0], p.ceil_mode);
  int64_t OW = pool_out(W, p.kernel[1], st[1], p.padding[1], p.dilation[1], p.ceil_mode);
  *sizes = Shape(x.sizes().begin(), x.sizes().end() - 2);
  sizes->push_back(OH);
  sizes->push_back(OW);
  std::vector<double> xv = values(x), out;
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t y = 0; y < OH; ++y)
      for (int64_t xo = 0; xo < OW; ++xo) {
        double best = -INFINITY, sum = 0;
        int64_t real = 0, padded = 0;
        for (int64_t i = 0; i < p.kernel[0]; ++i)
          for (int64_t j = 0; j < p.kernel[1]; ++j) {
            int64_t iy = y * st[0] - p.padding[0] + i * p.dilation[0];
            int64_t ix = xo * st[1] - p.padding[1] + j * p.dilation[1];
            // Taps in the padding count for count_include_pad; those past it never do.
            if (iy < H + p.padding[0] && ix < W + p.padding[1]) ++padded;
            if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
            double v = xv[(pl * H + iy) * W + ix];
            best = std::isnan(v) || std::isnan(best) ? NAN : std::max(best, v);
            sum += v;
            ++real;
          }
        out.push_back(is_max ? best : sum / (include_pad ? padded : real));
      }
  return out;
}

std::vector<Pool> pool_cases() {
  return {
      {{2, 2}, {}, {0, 0}, {1, 1}, false},     {{3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
      {{3, 3}, {2, 2}, {1, 1}, {1, 1}, true},  {{3, 2}, {2, 3}, {0, 1}, {1, 1}, true},
      {{2, 2}, {3, 3}, {0, 0}, {1, 1}, true},  // ceil_mode adds a partial last window
      {{1, 1}, {1, 1}, {0, 0}, {1, 1}, false}, {{5, 3}, {1, 2}, {2, 1}, {1, 1}, false},
  };
}

}  // namespace

TEST(MaxPool2d, MatchesReference) {
  std::vector<Pool> cases = pool_cases();
  cases.push_back({{3, 3}, {1, 1}, {1, 1}, {2, 2}, false});  // dilation
  cases.push_back({{2, 3}, {2, 2}, {1, 1}, {2, 1}, true});
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8, kInt8}) {
    for (const Pool& p : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " k " + shape_str(p.kernel) + " s " +
                   shape_str(p.stride) + " p " + shape_str(p.padding) + " d " +
                   shape_str(p.dilation) + (p.ceil_mode ? " ceil" : ""));
      Tensor x =
          dt == kUInt8 ? random({2, 3, 7, 8}, dt, 0, 100) : random({2, 3, 7, 8}, dt, -50, 50);
      Shape sizes;
      std::vector<double> want = ref_pool(x, p, true, false, &sizes);
      Tensor got = max_pool2d(x, p.kernel, p.stride, p.padding, p.dilation, p.ceil_mode);
      EXPECT_EQ(got.dtype(), dt);
      ct::expect_close(got, want, sizes, 0, 0);  // max selects: exact
      got = max_pool2d(noncontiguous(x), p.kernel, p.stride, p.padding, p.dilation, p.ceil_mode);
      ct::expect_close(got, want, sizes, 0, 0);
    }
  }
}

TEST(Pool2d, LargeInputsTakeTheParallelPath) {
  Tensor x = random({2, 8, 48, 48});
  Pool p{{3, 3}, {2, 2}, {1, 1}, {1, 1}, true};
  Shape sizes;
  std::vector<double> want = ref_pool(x, p, true, false, &sizes);
  ct::expect_close(max_pool2d(x, p.kernel, p.stride, p.padding, p.dilation, true), want, sizes, 0,
                   0);
  want = ref_pool(x, p, false, true, &sizes);
  ct::expect_close(avg_pool2d(x, p.kernel, p.stride, p.padding, true), want, sizes, 1e-5, 1e-6);
}

TEST(MaxPool2d, UnbatchedNanAndEmptyBatch) {
  Tensor x = random({3, 5, 5});
  Shape sizes;
  Pool p{{2, 2}, {1, 1}, {1, 1}, {1, 1}, false};
  ct::expect_close(max_pool2d(x, {2}, {1}, {1}), ref_pool(x, p, true, false, &sizes), sizes, 0, 0);
  Tensor n = zeros({1, 1, 2, 2});
  n.select(3, 1).select(2, 0).fill_(std::numeric_limits<double>::quiet_NaN());
  std::vector<double> got = values(max_pool2d(n, {2}));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(std::isnan(got[0]));
  EXPECT_EQ(max_pool2d(zeros({0, 2, 4, 4}), {2}).sizes(), (Shape{0, 2, 2, 2}));
}

// The gradient of each window goes to its first maximum in row-major order, or to its first NaN:
// ties (the zeros a ReLU leaves) and NaN anywhere in a window, as PyTorch routes them.
TEST(MaxPool2d, GradientGoesToTheFirstMaximumOrTheFirstNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // One plane of 4 x 5, windows 3 x 3 at stride 2 with padding 1 (ResNet's): 2 x 3 of them.
  Tensor x = tensor<double>({0, 0, 0, 1,   1,  //
                             2, 0, 2, 0,   1,  //
                             0, 0, 0, nan, 0,  //
                             0, 0, 5, nan, 0})
                 .reshape({1, 1, 4, 5})
                 .requires_grad_();
  Tensor y = max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
  y.backward(tensor<double>({1, 10, 100, 1000, 10000, 100000}).reshape({1, 1, 2, 3}));
  // Windows (rows, columns): (-1..1, -1..1) max 2 first at (1, 0); (-1..1, 1..3) 2 at (1, 2);
  // (-1..1, 3..5) 1 at (0, 3); (1..3, -1..1) 2 at (1, 0); (1..3, 1..3) NaN first at (2, 3);
  // (1..3, 3..5) NaN first at (2, 3).
  std::vector<double> want(20, 0.0);
  want[1 * 5 + 0] = 1 + 1000;
  want[1 * 5 + 2] = 10;
  want[0 * 5 + 3] = 100;
  want[2 * 5 + 3] = 10000 + 100000;
  ct::expect_close(x.grad(), want, {1, 1, 4, 5}, 0, 0);
}

TEST(MaxPool2d, Errors) {
  Tensor x = ones({1, 2, 5, 5});
  EXPECT_COIL_ERROR(max_pool2d(x, {3}, {}, {2}), "between 0 and half the kernel size");
  EXPECT_COIL_ERROR(max_pool2d(x, {0}), "kernel_size must be positive");
  EXPECT_COIL_ERROR(max_pool2d(x, {2}, {0}), "stride must be positive");
  EXPECT_COIL_ERROR(max_pool2d(x, {2}, {}, {0}, {0}), "dilation must be positive");
  EXPECT_COIL_ERROR(max_pool2d(x, {6}), "too small");
  EXPECT_COIL_ERROR(max_pool2d(x, {2, 2, 2}), "kernel_size must be one int or two");
  EXPECT_COIL_ERROR(max_pool2d(ones({5, 5}), {2}), "3-D (C, H, W) or 4-D");
  EXPECT_COIL_ERROR(max_pool2d(ones({1, 0, 5, 5}), {2}), "only the batch dim N may be 0");
  EXPECT_COIL_ERROR(max_pool2d(ones({1, 2, 5, 5}, kBool), {2}), "bool");
}

TEST(AvgPool2d, MatchesReferenceWithAndWithoutPadCounting) {
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    for (const Pool& p : pool_cases()) {
      for (bool include_pad : {true, false}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " k " + shape_str(p.kernel) + " s " +
                     shape_str(p.stride) + " p " + shape_str(p.padding) +
                     (p.ceil_mode ? " ceil" : "") + (include_pad ? " include_pad" : ""));
        Tensor x = random({2, 3, 7, 8}, dt);
        Shape sizes;
        std::vector<double> want = ref_pool(x, p, false, include_pad, &sizes);
        Tensor got = avg_pool2d(x, p.kernel, p.stride, p.padding, p.ceil_mode, include_pad);
        EXPECT_EQ(got.dtype(), dt);
        ct::expect_close(got, want, sizes, ct::rtol_for(dt), ct::rtol_for(dt));
        got = avg_pool2d(noncontiguous(x), p.kernel, p.stride, p.padding, p.ceil_mode, include_pad);
        ct::expect_close(got, want, sizes, ct::rtol_for(dt), ct::rtol_for(dt));
      }
    }
  }
}

TEST(AvgPool2d, Int64TruncatesAndUnbatched) {
  Tensor x = arange(0, 20, 1, kInt64).view({1, 4, 5});  // unbatched (C, H, W)
  Tensor got = avg_pool2d(x, {2});
  // Windows {0,1,5,6}, {2,3,7,8}, {10,11,15,16}, {12,13,17,18}: sums / 4 truncated.
  ct::expect_close(got, {3, 5, 13, 15}, {1, 2, 2}, 0, 0);
  EXPECT_EQ(got.dtype(), kInt64);
  EXPECT_COIL_ERROR(avg_pool2d(ones({1, 4, 4}, kInt32), {2}), "floating dtypes and int64 only");
  EXPECT_COIL_ERROR(avg_pool2d(ones({1, 4, 4}), {3}, {}, {2}),
                    "between 0 and half the kernel size");
}

TEST(AdaptiveAvgPool2d, TorchWindowBoundaries) {
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    for (auto [in, out] : std::vector<std::pair<Shape, Shape>>{{{7, 5}, {3, 2}},
                                                               {{3, 4}, {5, 7}},
                                                               {{6, 6}, {1, 1}},
                                                               {{5, 9}, {5, 9}},
                                                               {{4, 4}, {0, 2}}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(in) + " -> " + shape_str(out));
      Tensor x = random({2, 3, in[0], in[1]}, dt);
      std::vector<double> xv = values(x), want;
      int64_t H = in[0], W = in[1];
      for (int64_t pl = 0; pl < 6; ++pl)
        for (int64_t y = 0; y < out[0]; ++y)
          for (int64_t xo = 0; xo < out[1]; ++xo) {
            // start = floor(o * in / out), end = ceil((o + 1) * in / out)
            int64_t y0 = static_cast<int64_t>(std::floor(double(y * H) / out[0]));
            int64_t y1 = static_cast<int64_t>(std::ceil(double((y + 1) * H) / out[0]));
            int64_t x0 = static_cast<int64_t>(std::floor(double(xo * W) / out[1]));
            int64_t x1 = static_cast<int64_t>(std::ceil(double((xo + 1) * W) / out[1]));
            double s = 0;
            for (int64_t i = y0; i < y1; ++i)
              for (int64_t j = x0; j < x1; ++j) s += xv[(pl * H + i) * W + j];
            want.push_back(s / double((y1 - y0) * (x1 - x0)));
          }
      Shape sizes{2, 3, out[0], out[1]};
      ct::expect_close(adaptive_avg_pool2d(x, out), want, sizes, ct::rtol_for(dt),
                       ct::rtol_for(dt));
      ct::expect_close(adaptive_avg_pool2d(noncontiguous(x), out), want, sizes, ct::rtol_for(dt),
                       ct::rtol_for(dt));
    }
  }
  Tensor u = random({3, 4, 4});
  EXPECT_EQ(adaptive_avg_pool2d(u, {2}).sizes(), (Shape{3, 2, 2}));
}

TEST(AdaptiveAvgPool2d, Errors) {
  EXPECT_COIL_ERROR(adaptive_avg_pool2d(ones({1, 4, 4}, kInt64), {2}), "floating dtypes only");
  EXPECT_COIL_ERROR(adaptive_avg_pool2d(ones({1, 4, 4}), {-1, 2}), "non-negative");
  EXPECT_COIL_ERROR(adaptive_avg_pool2d(ones({4, 4}), {2}), "3-D (C, H, W) or 4-D");
  EXPECT_COIL_ERROR(adaptive_avg_pool2d(ones({1, 4, 4}), {1, 2, 3}), "one int or two");
}
