// Optimizers: several steps with gradients set by hand, against float64 references computed
// elementwise with plain loops (PyTorch's formulas), in float64 and float32; state, groups,
// zero_grad and errors.
#include <cmath>
#include <functional>

#include "testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

constexpr int kSteps = 5;
constexpr int64_t kNumel = 7;

// Per step, one gradient per element; the parameter's initial values.
struct Problem {
  std::vector<double> init;
  std::vector<std::vector<double>> grads;
};
Problem make_problem(uint64_t seed) {
  manual_seed(seed);
  Problem p{values(random({kNumel}, kFloat64)), {}};
  for (int s = 0; s < kSteps; ++s) p.grads.push_back(values(random({kNumel}, kFloat64)));
  return p;
}

// Runs `opt` for kSteps on a parameter of `dtype`, setting the gradients by hand, and returns
// the parameter after each step.
std::vector<std::vector<double>> run(
    const Problem& pr, DType dtype,
    const std::function<std::unique_ptr<optim::Optimizer>(const std::vector<Tensor>&)>& make) {
  Tensor p = tensor<double>(pr.init).to(dtype).requires_grad_();
  auto opt = make({p});
  std::vector<std::vector<double>> out;
  for (int s = 0; s < kSteps; ++s) {
    p.set_grad(tensor<double>(pr.grads[s]).to(dtype));
    opt->step();
    out.push_back(values(p));
  }
  return out;
}

void expect_trajectory(const std::vector<std::vector<double>>& got,
                       const std::vector<std::vector<double>>& ref, double rtol, double atol) {
  for (int s = 0; s < kSteps; ++s)
    for (int64_t i = 0; i < kNumel; ++i)
      ASSERT_NEAR(got[s][i], ref[s][i], atol + rtol * std::fabs(ref[s][i]))
          << "step " << s + 1 << ", element " << i;
}

std::vector<std::vector<double>> sgd_reference(const Problem& pr, const optim::SGDOptions& o) {
  std::vector<double> p = pr.init, buf(kNumel);
  std::vector<std::vector<double>> out;
  for (int s = 0; s < kSteps; ++s) {
    for (int64_t i = 0; i < kNumel; ++i) {
      double g = o.maximize ? -pr.grads[s][i] : pr.grads[s][i];
      g += o.weight_decay * p[i];
      if (o.momentum != 0) {
        buf[i] = s == 0 ? g : o.momentum * buf[i] + (1 - o.dampening) * g;
        g = o.nesterov ? g + o.momentum * buf[i] : buf[i];
      }
      p[i] -= o.lr * g;
    }
    out.push_back(p);
  }
  return out;
}

std::vector<std::vector<double>> adam_reference(const Problem& pr, const optim::AdamOptions& o,
                                                bool decoupled) {
  std::vector<double> p = pr.init, m(kNumel), v(kNumel), vmax(kNumel);
  const auto [b1, b2] = o.betas;
  std::vector<std::vector<double>> out;
  for (int s = 0; s < kSteps; ++s) {
    const double t = s + 1;
    for (int64_t i = 0; i < kNumel; ++i) {
      double g = o.maximize ? -pr.grads[s][i] : pr.grads[s][i];
      if (decoupled)
        p[i] *= 1 - o.lr * o.weight_decay;
      else
        g += o.weight_decay * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      vmax[i] = std::max(vmax[i], v[i]);
      double second = o.amsgrad ? vmax[i] : v[i];
      double denom = std::sqrt(second) / std::sqrt(1 - std::pow(b2, t)) + o.eps;
      p[i] -= o.lr / (1 - std::pow(b1, t)) * m[i] / denom;
    }
    out.push_back(p);
  }
  return out;
}

}  // namespace

TEST(NnOptim, SGDMatchesReference) {
  const optim::SGDOptions cases[] = {
      {.lr = 0.1},
      {.lr = 0.05, .momentum = 0.9},
      {.lr = 0.05, .momentum = 0.9, .dampening = 0.3, .weight_decay = 0.01},
      {.lr = 0.02, .momentum = 0.8, .weight_decay = 0.1, .nesterov = true},
      {.lr = 0.1, .momentum = 0.5, .maximize = true},
  };
  Problem pr = make_problem(21);
  for (const auto& o : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "momentum=" << o.momentum << " dampening=" << o.dampening
                 << " weight_decay=" << o.weight_decay << " nesterov=" << o.nesterov);
    auto make = [&](const std::vector<Tensor>& ps) { return std::make_unique<optim::SGD>(ps, o); };
    auto ref = sgd_reference(pr, o);
    expect_trajectory(run(pr, kFloat64, make), ref, 1e-12, 1e-14);
    expect_trajectory(run(pr, kFloat32, make), ref, 1e-5, 1e-6);
  }
}

TEST(NnOptim, AdamMatchesReference) {
  const optim::AdamOptions cases[] = {
      {.lr = 0.01},
      {.lr = 0.05, .betas = {0.8, 0.99}, .eps = 1e-6, .weight_decay = 0.1},
      {.lr = 0.01, .amsgrad = true},
      {.lr = 0.01, .weight_decay = 0.05, .amsgrad = true, .maximize = true},
  };
  Problem pr = make_problem(22);
  for (const auto& o : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "weight_decay=" << o.weight_decay << " amsgrad=" << o.amsgrad);
    auto make = [&](const std::vector<Tensor>& ps) { return std::make_unique<optim::Adam>(ps, o); };
    auto ref = adam_reference(pr, o, false);
    expect_trajectory(run(pr, kFloat64, make), ref, 1e-12, 1e-14);
    expect_trajectory(run(pr, kFloat32, make), ref, 1e-5, 1e-6);
  }
}

TEST(NnOptim, AdamWMatchesReference) {
  const optim::AdamWOptions cases[] = {
      {.lr = 0.01},  // weight_decay 1e-2 by default
      {.lr = 0.05, .betas = {0.85, 0.95}, .weight_decay = 0.3},
      {.lr = 0.02, .weight_decay = 0.1, .amsgrad = true},
  };
  Problem pr = make_problem(23);
  for (const auto& o : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "weight_decay=" << o.weight_decay << " amsgrad=" << o.amsgrad);
    auto make = [&](const std::vector<Tensor>& ps) {
      return std::make_unique<optim::AdamW>(ps, o);
    };
    optim::AdamOptions as_adam{o.lr, o.betas, o.eps, o.weight_decay, o.amsgrad, o.maximize};
    auto ref = adam_reference(pr, as_adam, true);
    expect_trajectory(run(pr, kFloat64, make), ref, 1e-12, 1e-14);
    expect_trajectory(run(pr, kFloat32, make), ref, 1e-5, 1e-6);
  }
}

TEST(NnOptim, StateGroupsAndSkippedParameters) {
  Tensor a = ones({3}).requires_grad_(), b = ones({2}).requires_grad_(),
         c = ones({2}).requires_grad_();
  optim::SGD sgd({{{a, b}, {.lr = 0.1, .momentum = 0.9}}, {{c}, {.lr = 1.0}}});
  EXPECT_EQ(sgd.parameters().size(), 3u);
  EXPECT_EQ(sgd.lr(1), 1.0);
  a.set_grad(ones({3}));
  c.set_grad(ones({2}));
  sgd.step();  // b has no gradient: skipped
  EXPECT_TRUE(allclose(a, full({3}, 0.9)));
  EXPECT_TRUE(equal(b, ones({2})));
  EXPECT_TRUE(allclose(c, zeros({2})));
  ASSERT_NE(sgd.state(a), nullptr);
  EXPECT_TRUE(equal(sgd.state(a)->momentum_buffer, ones({3})));
  EXPECT_EQ(sgd.state(b), nullptr);
  sgd.set_lr(0.5);
  sgd.param_groups[0].options.momentum = 0;  // options change between steps
  sgd.step();
  EXPECT_TRUE(allclose(a, full({3}, 0.4)));

  Tensor w = zeros({2}).requires_grad_();
  optim::Adam adam({w});
  w.set_grad(ones({2}));
  adam.step();
  adam.step();
  const optim::AdamState* s = adam.state(w);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->step, 2);
  EXPECT_TRUE(allclose(s->exp_avg, full({2}, 0.19)));
  EXPECT_FALSE(s->max_exp_avg_sq.defined());
}

TEST(NnOptim, ZeroGrad) {
  Tensor a = ones({2}).requires_grad_();
  optim::AdamW opt({a});
  a.set_grad(ones({2}));
  Tensor g = a.grad();
  opt.zero_grad(/*set_to_none=*/false);
  EXPECT_TRUE(equal(g, zeros({2})));
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
  opt.step();  // no gradients: nothing changes
  EXPECT_TRUE(equal(a, ones({2})));
}

TEST(NnOptim, Errors) {
  Tensor a = ones({2}).requires_grad_();
  EXPECT_COIL_ERROR(optim::SGD(std::vector<Tensor>{}), "group 0 is empty");
  EXPECT_COIL_ERROR(optim::SGD({a}, {.lr = -1}), "invalid learning rate -1");
  EXPECT_COIL_ERROR(optim::SGD({a}, {.lr = 0.1, .nesterov = true}),
                    "Nesterov momentum requires a momentum > 0");
  EXPECT_COIL_ERROR(optim::SGD({a, a}), "appears more than once");
  EXPECT_COIL_ERROR(optim::SGD({a * 2}), "is not a leaf tensor");
  EXPECT_COIL_ERROR(optim::SGD({ones({2}, kInt64)}), "only floating-point tensors");
  EXPECT_COIL_ERROR(optim::Adam({a}, {.betas = {0.9, 1.0}}), "invalid beta2 1");
  EXPECT_COIL_ERROR(optim::AdamW({a}, {.eps = -1}), "invalid eps -1");
  optim::Adam adam({a});
  adam.param_groups[0].options.lr = -0.5;
  a.set_grad(ones({2}));
  EXPECT_COIL_ERROR(adam.step(), "optim::Adam: invalid learning rate -0.5");
  EXPECT_COIL_ERROR(adam.lr(3), "no parameter group 3");
}
