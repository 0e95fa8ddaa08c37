// GradScaler (coil/grad_scaler.h) as torch.amp.GradScaler: a clean step unscales exactly and
// steps; a step whose gradients hold inf or NaN is skipped and halves the scale; the scale
// grows after growth_interval clean steps; unscale_ before step (to clip) does not unscale twice;
// state_dict round trips; misuse is a clear error.
#include <coil/coil.h>
#include <coil/grad_scaler.h>
#include <coil/optim.h>

#include "testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

struct Problem {
  Tensor w = random({6, 4}).requires_grad_();
  Tensor x = random({8, 4}), t = random({8, 6});
  Tensor loss() const { return mse_loss(linear(x, w), t); }
};

TEST(GradScaler, ACleanStepUnscalesExactlyAndSteps) {
  manual_seed(1);
  Problem a, b = a;  // the same data
  b.w = a.w.detach().clone().requires_grad_();
  // The reference: a plain SGD step.
  optim::SGD plain({a.w}, {.lr = 0.1});
  a.loss().backward();
  const Tensor want_grad = a.w.grad().clone();
  plain.step();
  // With the scaler: the scaled loss's gradient, unscaled, is the same (the scale is 2^16).
  optim::SGD opt({b.w}, {.lr = 0.1});
  amp::GradScaler scaler;
  scaler.scale(b.loss()).backward();
  EXPECT_TRUE(scaler.step(opt));
  scaler.update();
  expect_close(b.w.grad(), values(want_grad), want_grad.sizes(), 1e-6, 1e-7);
  expect_close(b.w, values(a.w), a.w.sizes(), 1e-6, 1e-7);
  EXPECT_EQ(scaler.get_scale(), 65536.0);
  EXPECT_EQ(scaler.state_dict().growth_tracker, 1);
}

TEST(GradScaler, AnOverflowingStepIsSkippedAndHalvesTheScale) {
  for (double bad : {std::numeric_limits<double>::infinity(), std::nan("")}) {
    SCOPED_TRACE(bad);
    manual_seed(2);
    Problem p;
    optim::SGD opt({p.w}, {.lr = 0.1});
    amp::GradScaler scaler({.init_scale = 1024.0});
    (scaler.scale(p.loss()) * bad).backward();
    const Tensor before = p.w.detach().clone();
    EXPECT_FALSE(scaler.step(opt));
    scaler.update();
    expect_close(p.w, values(before), before.sizes(), 0, 0);  // not stepped
    EXPECT_EQ(scaler.get_scale(), 512.0);
    EXPECT_EQ(scaler.state_dict().growth_tracker, 0);
  }
}

TEST(GradScaler, TheScaleGrowsAfterGrowthIntervalCleanSteps) {
  manual_seed(3);
  Problem p;
  optim::SGD opt({p.w}, {.lr = 0.01});
  amp::GradScaler scaler({.init_scale = 8.0, .growth_interval = 3});
  std::vector<double> scales;
  for (int i = 0; i < 7; ++i) {
    opt.zero_grad();
    scaler.scale(p.loss()).backward();
    EXPECT_TRUE(scaler.step(opt));
    scaler.update();
    scales.push_back(scaler.get_scale());
  }
  EXPECT_EQ(scales, (std::vector<double>{8, 8, 16, 16, 16, 32, 32}));
  scaler.update(4.0);  // an explicit scale
  EXPECT_EQ(scaler.get_scale(), 4.0);
}

// Unscaled first to clip the gradients, as users do: step() does not unscale again.
TEST(GradScaler, UnscaleThenClipThenStep) {
  manual_seed(4);
  Problem a, b = a;  // the same data
  b.w = a.w.detach().clone().requires_grad_();
  a.loss().backward();
  optim::SGD opt({b.w}, {.lr = 0.1});
  amp::GradScaler scaler;
  scaler.scale(b.loss()).backward();
  scaler.unscale_(opt);
  expect_close(b.w.grad(), values(a.w.grad()), a.w.grad().sizes(), 1e-6, 1e-7);
  b.w.grad().mul_(0.5);  // "clipping"
  const Tensor before = b.w.detach().clone();
  EXPECT_TRUE(scaler.step(opt));
  expect_close(b.w, values(before - a.w.grad() * 0.05), before.sizes(), 1e-6, 1e-7);
  try {
    scaler.unscale_(opt);
    ADD_FAILURE() << "a second unscale_ before update() is an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already called for this optimizer"), std::string::npos)
        << e.what();
  }
  scaler.update();
  opt.zero_grad();
  scaler.scale(b.loss()).backward();
  scaler.unscale_(opt);  // allowed again after update()
}

// A step whose last parameter's gradient (set, scaled by 1024) holds an inf: skipped, the scale
// halved, and the parameters and each one's `kept(opt, p)` state tensor as they were.
template <typename Opt, typename Kept>
void expect_overflow_skips(amp::GradScaler& scaler, Opt& opt, const std::vector<Tensor>& w,
                           Kept kept) {
  w.back().grad().view({-1}).select(0, 1).fill_(std::numeric_limits<double>::infinity());
  std::vector<Tensor> before, state;
  for (const Tensor& p : w) {
    before.push_back(p.detach().clone());
    state.push_back(kept(opt, p).clone());
  }
  EXPECT_FALSE(scaler.step(opt));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 512.0);
  for (size_t i = 0; i < w.size(); ++i) {
    SCOPED_TRACE("parameter " + std::to_string(i));
    expect_close(w[i], values(before[i]), before[i].sizes(), 0, 0);
    expect_close(kept(opt, w[i]), values(state[i]), state[i].sizes(), 0, 0);
  }
}

// With a compiled AdamW, step() unscales, checks and updates in the optimizer's one compiled
// step (Optimizer::step_unscaling), over both of its groups: a clean step equals AdamW's step
// on the true gradients, which it leaves unscaled; an inf in the second group skips the step in
// both (parameters, moments and step counts as they were) and halves the scale; the next clean
// step is the first.
TEST(GradScaler, ACompiledAdamWUnscalesChecksAndStepsInOneFunction) {
  manual_seed(6);
  auto make = [] {
    std::vector<Tensor> w = {random({5, 3}), random({7}), random({2, 2})};
    for (Tensor& t : w) t.requires_grad_();
    return w;
  };
  const std::vector<Tensor> w = make();
  std::vector<Tensor> ref(w.size()), grads(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    ref[i] = w[i].detach().clone().requires_grad_();
    grads[i] = random(w[i].sizes());
  }
  auto groups = [](const std::vector<Tensor>& p) {
    optim::AdamWOptions o{.lr = 0.05, .weight_decay = 0.1, .compiled = true};
    optim::AdamWOptions no_decay = o;
    no_decay.weight_decay = 0;
    return std::vector<optim::ParamGroup<optim::AdamWOptions>>{{{p[0], p[1]}, o},
                                                               {{p[2]}, no_decay}};
  };
  optim::AdamW opt(groups(w)), plain(groups(ref));
  amp::GradScaler scaler({.init_scale = 1024.0});
  auto set_grads = [&](double scale) {
    for (size_t i = 0; i < w.size(); ++i) {
      w[i].set_grad(grads[i] * scale);
      ref[i].set_grad(grads[i].clone());
    }
  };

  set_grads(1024.0);
  const std::string log = log_of("graph_code", [&] { EXPECT_TRUE(scaler.step(opt)); });
  EXPECT_NE(log.find("AdamW_step_unscaling"), std::string::npos) << log.substr(0, 2000);
  EXPECT_EQ(log.find("grad_scaler_unscale"), std::string::npos) << log.substr(0, 2000);
  scaler.update();
  plain.step();
  for (size_t i = 0; i < w.size(); ++i) {
    SCOPED_TRACE("parameter " + std::to_string(i));
    expect_close(w[i].grad(), values(grads[i]), grads[i].sizes(), 0, 0);
    expect_close(w[i], values(ref[i]), ref[i].sizes(), 1e-6, 1e-7);
    EXPECT_EQ(opt.state(w[i])->step, 1);
  }

  set_grads(1024.0);
  expect_overflow_skips(scaler, opt, w,
                        [](optim::AdamW& o, const Tensor& p) { return o.state(p)->exp_avg; });
  for (const Tensor& p : w) EXPECT_EQ(opt.state(p)->step, 1);

  set_grads(512.0);
  EXPECT_TRUE(scaler.step(opt));
  plain.step();
  for (size_t i = 0; i < w.size(); ++i) {
    SCOPED_TRACE("parameter " + std::to_string(i));
    expect_close(w[i], values(ref[i]), ref[i].sizes(), 1e-6, 1e-7);
    EXPECT_EQ(opt.state(w[i])->step, 2);
  }
}

// A compiled SGD with momentum, the same in one function from its second step on (its first
// makes the momentum buffers from the gradients, unscaled first): a clean step equals SGD's on
// the true gradients; an inf skips it in both groups (parameters and momentum buffers as they
// were) and halves the scale; the next clean step goes on from there.
TEST(GradScaler, ACompiledSGDUnscalesChecksAndStepsInOneFunction) {
  manual_seed(8);
  std::vector<Tensor> w = {random({5, 3}).requires_grad_(), random({7}).requires_grad_(),
                           random({2, 2}).requires_grad_()};
  std::vector<Tensor> ref, grads;
  for (const Tensor& p : w) {
    ref.push_back(p.detach().clone().requires_grad_());
    grads.push_back(random(p.sizes()));
  }
  auto groups = [](const std::vector<Tensor>& p) {
    const optim::SGDOptions nesterov{
        .lr = 0.05, .momentum = 0.9, .weight_decay = 0.1, .nesterov = true, .compiled = true};
    const optim::SGDOptions damped{.lr = 0.1, .momentum = 0.5, .dampening = 0.25, .compiled = true};
    return std::vector<optim::ParamGroup<optim::SGDOptions>>{{{p[0], p[1]}, nesterov},
                                                             {{p[2]}, damped}};
  };
  optim::SGD opt(groups(w)), plain(groups(ref));
  amp::GradScaler scaler({.init_scale = 1024.0});
  for (int k = 0; k < 2; ++k) {
    for (size_t i = 0; i < w.size(); ++i) {
      w[i].set_grad(grads[i] * scaler.get_scale());
      ref[i].set_grad(grads[i].clone());
    }
    const std::string log = log_of("graph_code", [&] { EXPECT_TRUE(scaler.step(opt)); });
    EXPECT_EQ(log.find("SGD_step_unscaling") != std::string::npos, k == 1) << log.substr(0, 2000);
    scaler.update();
    plain.step();
    for (size_t i = 0; i < w.size(); ++i) {
      SCOPED_TRACE("step " + std::to_string(k) + ", parameter " + std::to_string(i));
      expect_close(w[i].grad(), values(grads[i]), grads[i].sizes(), 0, 0);
      expect_close(w[i], values(ref[i]), ref[i].sizes(), 1e-6, 1e-7);
    }
  }

  for (size_t i = 0; i < w.size(); ++i) w[i].set_grad(grads[i] * scaler.get_scale());
  expect_overflow_skips(scaler, opt, w,
                        [](optim::SGD& o, const Tensor& p) { return o.state(p)->momentum_buffer; });

  for (size_t i = 0; i < w.size(); ++i) {
    w[i].set_grad(grads[i] * 512.0);
    ref[i].set_grad(grads[i].clone());
  }
  EXPECT_TRUE(scaler.step(opt));
  plain.step();
  for (size_t i = 0; i < w.size(); ++i) {
    SCOPED_TRACE("parameter " + std::to_string(i));
    expect_close(w[i], values(ref[i]), ref[i].sizes(), 1e-6, 1e-7);
  }
}

// An optimizer without a compiled step (AdamW not compiled), or a compiled SGD's first step with
// momentum, takes the separate unscaling.
TEST(GradScaler, OptimizersWithoutAScaledStepUnscaleFirst) {
  manual_seed(7);
  Problem p;
  optim::AdamW opt({p.w}, {.lr = 0.1});
  EXPECT_FALSE(opt.step_unscaling(1.0).has_value());
  optim::SGD sgd({p.w}, {.lr = 0.1, .momentum = 0.9, .compiled = true});
  p.w.set_grad(zeros_like(p.w));
  EXPECT_FALSE(sgd.step_unscaling(1.0).has_value());
  amp::GradScaler scaler;
  scaler.scale(p.loss()).backward();
  const std::string log = log_of("graph_code", [&] { EXPECT_TRUE(scaler.step(opt)); });
  EXPECT_NE(log.find("grad_scaler_unscale"), std::string::npos) << log.substr(0, 2000);
}

TEST(GradScaler, StateDictRoundTripsAndDisabledPassesThrough) {
  amp::GradScaler a({.init_scale = 256.0, .growth_interval = 5});
  a.update();
  a.update();
  amp::GradScaler b;
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(b.get_scale(), 256.0);
  EXPECT_EQ(b.state_dict().growth_tracker, 2);
  EXPECT_EQ(b.state_dict().growth_interval, 5);
  amp::GradScalerState broken = a.state_dict();
  broken.backoff_factor = 2;
  EXPECT_THROW(b.load_state_dict(broken), Error);
  EXPECT_THROW(amp::GradScaler({.init_scale = -1}), Error);

  manual_seed(5);
  Problem p;
  optim::SGD opt({p.w}, {.lr = 0.1});
  amp::GradScaler off({.enabled = false});
  Tensor loss = p.loss();
  EXPECT_TRUE(off.scale(loss).is_same(loss));
  EXPECT_EQ(off.get_scale(), 1.0);
}

}  // namespace
