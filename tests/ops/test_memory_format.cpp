// Channels-last (NHWC) tensors: the layout checks and copies, the ops that keep it (pointwise
// ops, batch norm, convolutions and their bias, max pooling), a model converted with
// nn::Module::to(MemoryFormat::ChannelsLast), eager and compiled, forward and backward — each
// against the same computation on NCHW tensors.
#include <map>

#include <coil/coil.h>
#include <coil/nn/resnet.h>

#include "runtime/kernels/onednn_conv.h"
#include "memory_format_testing.h"
#include "testing.h"

using namespace coil;
using coil::testing::expect_channels_last;
using coil::testing::random;
using coil::testing::relative_difference;

TEST(MemoryFormat, ChannelsLastCopiesAndChecks) {
  Tensor x = random({2, 3, 4, 5});
  EXPECT_TRUE(x.is_contiguous(MemoryFormat::Contiguous));
  EXPECT_FALSE(x.is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_EQ(x.suggest_memory_format(), MemoryFormat::Contiguous);
  Tensor y = x.contiguous(MemoryFormat::ChannelsLast);
  EXPECT_EQ(y.strides(), (Shape{60, 1, 15, 3}));
  EXPECT_FALSE(y.is_contiguous());
  expect_channels_last(y, "copy");
  EXPECT_TRUE(equal(y, x));
  EXPECT_TRUE(y.contiguous(MemoryFormat::ChannelsLast).is_same(y));  // already so: itself
  EXPECT_TRUE(y.contiguous().is_contiguous());
  // One channel, or one pixel: both layouts at once, and contiguous is the one suggested.
  Tensor one_channel = random({2, 1, 4, 5}).contiguous(MemoryFormat::ChannelsLast);
  EXPECT_TRUE(one_channel.is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_EQ(one_channel.suggest_memory_format(), MemoryFormat::Contiguous);
  EXPECT_COIL_ERROR(random({3, 4, 5}).contiguous(MemoryFormat::ChannelsLast), "needs a 4-D");
}

// Batch norm reads and writes a channels-last input as rows of channels, with the statistics
// and running statistics of NCHW (large enough to share the rows among threads), float32 and
// float64.
TEST(MemoryFormat, BatchNormOnChannelsLastMatchesNchw) {
  for (DType t : {kFloat32, kFloat64}) {
    Tensor x = random({4, 32, 28, 28}, t), g = random({32}, t), beta = random({32}, t);
    Tensor xc = x.contiguous(MemoryFormat::ChannelsLast);
    for (bool training : {false, true}) {
      Tensor m1 = random({32}, t), v1 = rand({32}, t) + 0.5, m2 = m1.clone(), v2 = v1.clone();
      Tensor want = batch_norm(x, g, beta, m1, v1, training);
      Tensor got = batch_norm(xc, g, beta, m2, v2, training);
      expect_channels_last(got, "batch_norm");
      const double tol = t == kFloat32 ? 1e-5 : 1e-12;
      EXPECT_TRUE(allclose(got, want, tol, tol)) << dtype_name(t) << " training " << training;
      EXPECT_TRUE(allclose(m2, m1, tol, tol)) << dtype_name(t);
      EXPECT_TRUE(allclose(v2, v1, tol, tol)) << dtype_name(t);
    }
  }
}

// Max pooling reads a channels-last input as rows of channels: the values of NCHW pooling for
// every window form (padding, stride, dilation, ceil_mode, more channels than one register
// chunk), NaN propagating, integer dtypes too.
TEST(MemoryFormat, MaxPoolOnChannelsLastMatchesNchw) {
  struct Form {
    Shape k, stride, pad, dil;
    bool ceil;
  };
  for (DType t : {kFloat32, kFloat64, kInt32}) {
    Tensor x = random({2, 70, 11, 9}, t, -50, 50);
    if (t == kFloat32) x = where(random({2, 70, 11, 9}) > 1.8, NAN, x);
    Tensor xc = x.contiguous(MemoryFormat::ChannelsLast);
    for (const Form& f :
         {Form{{3, 3}, {2, 2}, {1, 1}, {1, 1}, false}, Form{{2, 3}, {1, 2}, {0, 1}, {2, 1}, true},
          Form{{3, 2}, {}, {0, 0}, {1, 1}, true}}) {
      Tensor want = max_pool2d(x, f.k, f.stride, f.pad, f.dil, f.ceil);
      Tensor got = max_pool2d(xc, f.k, f.stride, f.pad, f.dil, f.ceil);
      expect_channels_last(got, "max_pool2d");
      EXPECT_TRUE(allclose(got, want, 0, 0, /*equal_nan=*/true)) << dtype_name(t);
    }
  }
}

// The ops around a convolution keep its layout, and compute what they compute on NCHW.
TEST(MemoryFormat, OpsKeepChannelsLast) {
  Tensor x = random({2, 8, 9, 7}), w = random({6, 8, 3, 3}), b = random({6});
  Tensor xc = x.contiguous(MemoryFormat::ChannelsLast);
  Tensor y = conv2d(x, w, b, {1, 1}, {1, 1}), yc = conv2d(xc, w, b, {1, 1}, {1, 1});
  expect_channels_last(yc, "conv2d of a channels-last input");
  EXPECT_TRUE(allclose(yc, y, 1e-4, 1e-5));
  expect_channels_last(conv2d(x, w.contiguous(MemoryFormat::ChannelsLast), b, {2, 2}),
                       "conv2d with a channels-last weight");
  Tensor mean = random({6}), var = rand({6}) + 0.5, g = random({6}), beta = random({6});
  for (bool training : {false, true}) {
    Tensor want = batch_norm(y, g, beta, mean.clone(), var.clone(), training);
    Tensor got = batch_norm(yc, g, beta, mean.clone(), var.clone(), training);
    expect_channels_last(got, training ? "batch_norm, training" : "batch_norm");
    EXPECT_TRUE(allclose(got, want, 1e-4, 1e-5));
  }
  expect_channels_last(relu(yc), "relu");
  expect_channels_last(yc + yc * 2, "add, mul");
  expect_channels_last(yc + b.reshape({1, 6, 1, 1}), "add of a broadcast per-channel value");
  expect_channels_last(where(yc > 0, yc, 0.5), "where");
  Tensor p = max_pool2d(yc, {3, 3}, {2, 2}, {1, 1});
  expect_channels_last(p, "max_pool2d");
  Tensor pooled_from = yc.detach().requires_grad_();
  expect_channels_last(autograd::grad({(max_pool2d(pooled_from, {3, 3}, {2, 2}, {1, 1}) * 3).sum()},
                                      {pooled_from})[0],
                       "max_pool2d's input gradient");
  EXPECT_TRUE(equal(p, max_pool2d(yc.contiguous(), {3, 3}, {2, 2}, {1, 1})));
  // An NCHW operand beside a channels-last one: the first tensor's layout, as torch.
  EXPECT_TRUE((y + yc).is_contiguous());
  // Gradients: the input's channels-last as the input, the weight's laid out as the weight.
  auto grads = [&](MemoryFormat f) {
    Tensor xg = x.contiguous(f).detach().requires_grad_();
    Tensor wg = w.contiguous(f).detach().requires_grad_();
    (conv2d(xg, wg, b, {1, 1}, {1, 1}) * y).sum().backward();
    return std::pair{xg.grad(), wg.grad()};
  };
  auto [dx, dw] = grads(MemoryFormat::Contiguous);
  auto [dxc, dwc] = grads(MemoryFormat::ChannelsLast);
  expect_channels_last(dxc, "conv2d's input gradient");
  expect_channels_last(dwc, "conv2d's weight gradient");
  EXPECT_TRUE(allclose(dxc, dx, 1e-4, 1e-4));
  EXPECT_TRUE(allclose(dwc, dw, 1e-4, 1e-3));
}

// A ResNet converted to channels-last, fed channels-last images: every convolution's output is
// channels-last, and the logits and the gradients are the NCHW model's, eager and compiled. (In
// the ResNet suite: a whole model's numerics, which the sanitizer build leaves out.)
TEST(ResNet, ChannelsLastRunsAsNchwEagerAndCompiled) {
  manual_seed(0);
  auto nchw = nn::resnet18({.num_classes = 10, .width = 8});
  auto nhwc = nn::resnet18({.num_classes = 10, .width = 8});
  nhwc->load_state_dict(nchw->state_dict());
  nhwc->to(MemoryFormat::ChannelsLast);
  for (const auto& [name, t] : nhwc->named_parameters())
    EXPECT_TRUE(t.dim() != 4 || t.is_contiguous(MemoryFormat::ChannelsLast)) << name;
  Tensor x = random({8, 3, 32, 32}), xc = x.contiguous(MemoryFormat::ChannelsLast);
  nchw->eval();
  nhwc->eval();
  {
    NoGradGuard no_grad;
    Tensor want = nchw->forward(x);
    EXPECT_TRUE(allclose(nhwc->forward(xc), want, 1e-4, 1e-4));
    auto compiled = compile(nhwc);
    for (int call = 0; call < 2; ++call)
      EXPECT_TRUE(allclose(compiled(xc), want, 1e-4, 1e-4)) << "call " << call;
    // The first stage's output, as eager and compiled give it: channels-last.
    auto stem = [&](const Tensor& t) { return relu(nhwc->conv1->forward(t)); };
    expect_channels_last(stem(xc), "eager stem");
    expect_channels_last(compile(stem)(xc), "compiled stem");
  }
  nchw->train();
  nhwc->train();
  Tensor labels = randint(0, 10, {8});
  cross_entropy(nchw->forward(x), labels).backward();
  auto loss =
      compile([&](const Tensor& a, const Tensor& l) { return cross_entropy(nhwc->forward(a), l); });
  loss(xc, labels).backward();
  std::map<std::string, Tensor> want;
  for (const auto& [name, t] : nchw->named_parameters()) want[name] = t;
  for (const auto& [name, t] : nhwc->named_parameters()) {
    ASSERT_TRUE(t.grad().defined()) << name;
    EXPECT_LT(relative_difference(t.grad(), want.at(name).grad()), 1e-3) << name;
  }
}

// oneDNN's preferred form keeps a weight's reordered copy while the weight is unchanged; every
// write to the weight (an in-place op, load_state_dict) makes the next call reorder it again.
TEST(MemoryFormat, AKeptReorderedWeightFollowsWritesToIt) {
  struct Restore {
    ~Restore() { set_onednn_conv_form(ConvForm::fastest); }
  } restore;
  set_onednn_conv_form(ConvForm::preferred);
  Tensor x = random({2, 16, 9, 9}).contiguous(MemoryFormat::ChannelsLast);
  Tensor w = random({24, 16, 3, 3});
  Tensor y = conv2d(x, w, {}, {1, 1}, {1, 1});
  EXPECT_TRUE(equal(conv2d(x, w, {}, {1, 1}, {1, 1}), y));  // the kept weight
  w.mul_(2);
  EXPECT_TRUE(allclose(conv2d(x, w, {}, {1, 1}, {1, 1}), y * 2, 1e-5, 1e-5));
  auto conv = std::make_shared<nn::Conv2d>(16, 24, 3, nn::Conv2dOptions{.padding = {1, 1}});
  Tensor before = conv->forward(x);
  const nn::StateDict other = {{"weight", random({24, 16, 3, 3})}, {"bias", random({24})}};
  conv->load_state_dict(other);
  Tensor after = conv->forward(x);
  EXPECT_FALSE(allclose(after, before));
  EXPECT_TRUE(
      allclose(after, conv2d(x, other["weight"], other["bias"], {1, 1}, {1, 1}), 1e-5, 1e-5));
}
