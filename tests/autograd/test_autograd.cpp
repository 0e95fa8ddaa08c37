// Eager autograd: backward, accumulation, grad(), grad mode, detach, retain_graph,
// create_graph, in-place rules, and the errors a user can run into.
#include <gtest/gtest.h>

#include <coil/coil.h>

#include "testing.h"

namespace coil::testing {
namespace {

TEST(Autograd, LinearReluSumMatchesHandDerivative) {
  manual_seed(1);
  Tensor x = random({5, 3}), w = random({3, 4}).requires_grad_();
  Tensor loss = matmul(x, w).relu().sum();
  EXPECT_EQ(autograd::grad_fn_name(loss), "SumBackward");
  EXPECT_FALSE(loss.is_leaf());
  EXPECT_TRUE(w.is_leaf());
  loss.backward();
  // d/dw sum(relu(xw)) = x^T (xw > 0)
  Tensor expected = matmul(x.t(), (matmul(x, w) > 0).to(kFloat32));
  ASSERT_TRUE(w.grad().defined());
  EXPECT_TRUE(allclose(w.grad(), expected, 1e-5, 1e-5));
  EXPECT_FALSE(w.grad().requires_grad());
}

TEST(Autograd, GradientsAccumulateAcrossBackwards) {
  Tensor w = tensor<float>({1, 2, 3}).requires_grad_();
  (w * w).sum().backward();
  (w * 3).sum().backward();
  EXPECT_EQ(values(w.grad()), (std::vector<double>{5, 7, 9}));
  w.set_grad({});
  EXPECT_FALSE(w.grad().defined());
}

TEST(Autograd, SharedInputsSumTheirGradients) {
  Tensor x = tensor<double>({2}).requires_grad_();
  Tensor y = x * x * x + x.exp();  // 3x^2 + e^x
  y.backward();
  EXPECT_NEAR(values(x.grad())[0], 12 + std::exp(2.0), 1e-12);
}

TEST(Autograd, GradReturnsWithoutAccumulating) {
  Tensor a = tensor<double>({1, 2}).requires_grad_(), b = tensor<double>({3, 4}).requires_grad_();
  Tensor out = (a * b).sum();
  std::vector<Tensor> g = autograd::grad({out}, {a, b});
  EXPECT_EQ(values(g[0]), (std::vector<double>{3, 4}));
  EXPECT_EQ(values(g[1]), (std::vector<double>{1, 2}));
  EXPECT_FALSE(a.grad().defined());
  Tensor unused = tensor<double>({0}).requires_grad_();
  Tensor out2 = (a * 2).sum();
  EXPECT_THROW(autograd::grad({out2}, {unused}, {}, true), Error);
  EXPECT_FALSE(autograd::grad({out2}, {unused}, {}, false, false, true)[0].defined());
}

TEST(Autograd, GradOfAnIntermediate) {
  Tensor x = tensor<double>({1, 2}).requires_grad_();
  Tensor h = x * 3;
  Tensor out = (h * h).sum();
  EXPECT_EQ(values(autograd::grad({out}, {h})[0]), (std::vector<double>{6, 12}));
}

TEST(Autograd, NoGradAndDetachRecordNothing) {
  Tensor w = random({3}).requires_grad_();
  {
    NoGradGuard guard;
    EXPECT_FALSE(grad_mode_enabled());
    Tensor y = w * 2;
    EXPECT_FALSE(y.requires_grad());
    {
      EnableGradGuard enable;
      EXPECT_TRUE((w * 2).requires_grad());
    }
  }
  EXPECT_TRUE(grad_mode_enabled());
  Tensor d = w.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.shares_storage(w));
  EXPECT_FALSE((d * 2).requires_grad());
  // Integer and bool results never require grad.
  EXPECT_FALSE((w > 0).requires_grad());
  EXPECT_FALSE(argmax(w).requires_grad());
}

TEST(Autograd, RetainGraphAndFreedGraph) {
  Tensor w = tensor<double>({2}).requires_grad_();
  Tensor y = (w.exp() * w).sum();
  y.backward({}, /*retain_graph=*/true);
  y.backward();
  EXPECT_NEAR(values(w.grad())[0], 2 * 3 * std::exp(2.0), 1e-12);
  try {
    y.backward();
    FAIL() << "a second backward through a freed graph must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("retain_graph"), std::string::npos) << e.what();
  }
}

TEST(Autograd, CreateGraphGivesSecondDerivatives) {
  Tensor x = tensor<double>({0.5, 2}).requires_grad_();
  Tensor y = (x * x * x).sum();  // dy/dx = 3x^2, d2y/dx2 = 6x
  Tensor g = autograd::grad({y}, {x}, {}, false, /*create_graph=*/true)[0];
  EXPECT_TRUE(g.requires_grad());
  Tensor gg = autograd::grad({g.sum()}, {x})[0];
  EXPECT_EQ(values(gg), (std::vector<double>{3, 12}));
}

TEST(Autograd, NonScalarBackwardNeedsAGradient) {
  Tensor w = random({2, 3}).requires_grad_();
  Tensor y = w * 2;
  EXPECT_THROW(y.backward(), Error);
  EXPECT_THROW(y.backward(ones({3})), Error);
  y.backward(ones({2, 3}));
  EXPECT_EQ(values(w.grad()), std::vector<double>(6, 2.0));
  Tensor plain = random({2});
  EXPECT_THROW(plain.sum().backward(), Error);
}

TEST(Autograd, InPlaceRules) {
  Tensor leaf = random({3}).requires_grad_();
  EXPECT_THROW(leaf.add_(1), Error);  // a leaf that requires grad
  {
    NoGradGuard no_grad;
    leaf.mul_(2);  // what optimizers do
  }
  // In place on a non-leaf rebases its history.
  Tensor x = tensor<double>({1, 2, 3}).requires_grad_();
  Tensor h = x * 2;
  h.relu_();
  h.mul_(3);
  h.sum().backward();
  EXPECT_EQ(values(x.grad()), std::vector<double>(3, 6.0));
  // A tensor saved for backward and then changed in place is an error, not a wrong answer.
  Tensor x2 = tensor<double>({1, 2}).requires_grad_();
  Tensor e = x2.exp();
  Tensor s = e.sum();
  e.add_(1);
  EXPECT_THROW(s.backward(), Error);
  // A view of a leaf that requires grad cannot be changed in place while recording.
  EXPECT_COIL_ERROR(x2.select(0, 0).mul_(2), "is a view of a leaf tensor that requires grad");
  // A leaf's copy_ under no_grad, as load_state_dict does.
  {
    NoGradGuard no_grad;
    leaf.copy_(zeros({3}));
  }
  EXPECT_EQ(values(leaf), std::vector<double>(3, 0.0));
}

// Writing through a view rewrites its base's history (PyTorch's view + in-place): the base's
// gradient sees the write, and so does every other view of the base used afterwards.
TEST(Autograd, InPlaceThroughAViewReachesTheBase) {
  Tensor x = tensor<double>({1, 2, 3, 4, 5, 6}, Shape{2, 3}).requires_grad_();
  Tensor y = x * 2;
  y.select(0, 1).mul_(3);
  y.sum().backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{2, 2, 2, 6, 6, 6}));

  // A base that did not require grad starts to, through a value written into its view.
  Tensor w = tensor<double>({1, 2}).requires_grad_();
  Tensor b = zeros({2, 3}, kFloat64);
  b.narrow(1, 1, 2).select(0, 0).copy_(w);
  EXPECT_TRUE(b.requires_grad());
  (b * b).sum().backward();
  EXPECT_EQ(values(w.grad()), (std::vector<double>{2, 4}));

  // A view taken before the write, used after it, has the write in its history too.
  Tensor x3 = tensor<double>({1, 2, 3, 4}, Shape{2, 2}).requires_grad_();
  Tensor w3 = tensor<double>({10, 20}).requires_grad_();
  Tensor y3 = x3 * 1;
  Tensor column = y3.select(1, 0);  // elements (0, 0) and (1, 0)
  y3.select(0, 0).mul_(w3);         // row 0 times w3
  (column * column).sum().backward();
  // column = [x00 * w0, x10]: d/dx00 = 2 x00 w0^2, d/dx10 = 2 x10; d/dw0 = 2 x00^2 w0.
  EXPECT_EQ(values(x3.grad()), (std::vector<double>{200, 0, 6, 0}));
  EXPECT_EQ(values(w3.grad()), (std::vector<double>{20, 0}));
}

// A view does not keep its base alive. Written after the base is gone, it takes the new history
// alone; another view of that base, used afterwards, raises rather than miss the write.
TEST(Autograd, InPlaceThroughAViewOfAFreedTensor) {
  Tensor x = tensor<double>({1, 2, 3, 4}, Shape{2, 2}).requires_grad_();
  Tensor row, column;
  {
    Tensor y = x * 1;
    row = y.select(0, 0);
    column = y.select(1, 0);
  }
  row.mul_(3);
  row.sum().backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{3, 3, 0, 0}));
  EXPECT_COIL_ERROR(column * 2, "another view of the same tensor was changed in place");
}

TEST(Autograd, InPlaceThroughViewsPassesGradcheck) {
  using V = std::vector<Tensor>;
  auto f = [](const V& in) {
    Tensor y = in[0].sin();
    y.t().narrow(0, 1, 2).mul_(in[1]);            // a transpose's rows: columns 1 and 2
    y.reshape({12}).narrow(0, 0, 3).add_(in[2]);  // a contiguous reshape is a view
    Tensor s = y.select(1, 0);                    // taken after both writes
    return V{y.exp(), s * 2};
  };
  EXPECT_NO_THROW(gradcheck(f, {random({3, 4}), random({2, 3}), random({3})}));
}

TEST(Autograd, CopyIntoANonLeafCarriesTheGradient) {
  Tensor src = tensor<double>({1, 2}).requires_grad_();
  Tensor dst = zeros({2}, kFloat64);
  dst.copy_(src * 3);
  EXPECT_TRUE(dst.requires_grad());
  (dst * dst).sum().backward();
  EXPECT_EQ(values(src.grad()), (std::vector<double>{18, 36}));
}

TEST(Autograd, DropoutBackwardUsesTheForwardMask) {
  manual_seed(5);
  Tensor x = (random({64}, kFloat64, 1, 2)).requires_grad_();
  Tensor y = dropout(x, 0.25, true);
  y.sum().backward();
  std::vector<double> yv = values(y), xv = values(x), gv = values(x.grad());
  int kept = 0;
  for (size_t i = 0; i < yv.size(); ++i) {
    const bool keep = yv[i] != 0;
    kept += keep;
    EXPECT_NEAR(gv[i], keep ? 1 / 0.75 : 0.0, 1e-12);
    if (keep) {
      EXPECT_NEAR(yv[i], xv[i] / 0.75, 1e-12);
    }
  }
  EXPECT_GT(kept, 30);
  // The same seed gives the same mask with and without autograd.
  manual_seed(5);
  Tensor x_plain = random({64}, kFloat64, 1, 2);
  EXPECT_TRUE(allclose(dropout(x_plain, 0.25, true), y.detach()));
}

// as_strided's gradient goes back to the storage positions the view read.
TEST(Autograd, AsStridedGradientGoesToTheElementsRead) {
  Tensor x = arange(16, kFloat32).reshape({4, 4}).requires_grad_();
  (x * 2).as_strided({2, 2}, {4, 1}, 1).sum().backward();  // reads positions 1, 2, 5, 6
  std::vector<double> expected(16, 0.0);
  for (int i : {1, 2, 5, 6}) expected[static_cast<size_t>(i)] = 2;
  EXPECT_EQ(values(x.grad()), expected);
  // Overlapping windows (positions 0-2, 1-3, 2-4): each position gets one per read.
  Tensor y = arange(6, kFloat32).requires_grad_();
  y.as_strided({3, 3}, {1, 1}).sum().backward();
  EXPECT_EQ(values(y.grad()), (std::vector<double>{1, 2, 3, 2, 1, 0}));
}

TEST(Autograd, GradcheckReportsAWrongGradient) {
  // sign() has zero derivative; a function that lies about it is caught.
  auto wrong = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{x[0] * x[0].detach()};  // analytical x, true 2x
  };
  EXPECT_THROW(gradcheck(wrong, {tensor<double>({1.5, -0.5})}), Error);
}

TEST(Autograd, TrainsALinearModel) {
  manual_seed(2);
  Tensor x = random({64, 3}, kFloat64);
  Tensor w_true = tensor<double>({1.5, -2, 0.5}, Shape{3, 1});
  Tensor y = matmul(x, w_true) + 0.25;
  Tensor w = zeros({3, 1}, kFloat64).requires_grad_(), b = zeros({1}, kFloat64).requires_grad_();
  double first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    Tensor loss = mse_loss(matmul(x, w) + b, y);
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
    loss.backward();
    NoGradGuard no_grad;
    w.sub_(w.grad() * 0.1);
    b.sub_(b.grad() * 0.1);
    w.set_grad({});
    b.set_grad({});
  }
  EXPECT_LT(last, first * 1e-4);
  EXPECT_TRUE(allclose(w.detach(), w_true, 1e-3, 1e-3));
}

}  // namespace
}  // namespace coil::testing
