// The compiled optimizer step: the same parameters as the eager step, one generated kernel for
// all of them (a combo kernel), no recompile as the step count and learning rate change.
#include <gtest/gtest.h>

#include <coil/coil.h>

#include "testing.h"

namespace coil::testing {
namespace {

struct Setup {
  std::vector<Tensor> params;
  std::vector<Tensor> grads;
};

// Parameters of several sizes (by default a linear layer's weight and bias, a norm's scale),
// and the gradients each step gives them.
Setup make(uint64_t seed,
           const std::vector<Shape>& shapes = {Shape{64, 32}, Shape{32}, Shape{10, 64}, Shape{7}}) {
  manual_seed(seed);
  Setup s;
  for (const Shape& shape : shapes) s.params.push_back(random(shape).requires_grad_());
  for (const Tensor& p : s.params) s.grads.push_back(random(p.sizes()));
  return s;
}

template <typename Opt, typename Options>
void expect_compiled_matches_eager(Options options) {
  Setup eager = make(3), comp = make(3);
  Options compiled_options = options;
  compiled_options.compiled = true;
  Opt eager_opt(eager.params, options), comp_opt(comp.params, compiled_options);
  compiler_reset();
  for (int step = 0; step < 4; ++step) {
    for (size_t i = 0; i < eager.params.size(); ++i) {
      eager.params[i].set_grad(eager.grads[i] * (step + 1));
      comp.params[i].set_grad(comp.grads[i] * (step + 1));
    }
    if (step == 2) {  // a scheduler's change of learning rate: no recompile
      eager_opt.set_lr(options.lr / 2);
      comp_opt.set_lr(options.lr / 2);
    }
    eager_opt.step();
    comp_opt.step();
    for (size_t i = 0; i < eager.params.size(); ++i)
      EXPECT_TRUE(allclose(comp.params[i], eager.params[i], 1e-5, 1e-6))
          << "step " << step << " param " << i;
  }
  auto c = counters();
  EXPECT_EQ(c["compiles"], 1);
  EXPECT_EQ(c["recompiles"], 0);
  EXPECT_EQ(c["generated_kernels"], 1);  // every parameter's update in one combo kernel
}

TEST(CompiledOptim, AdamMatchesEager) {
  expect_compiled_matches_eager<optim::Adam>(optim::AdamOptions{.lr = 1e-2, .weight_decay = 0.1});
}

TEST(CompiledOptim, AdamWAmsgradMatchesEager) {
  expect_compiled_matches_eager<optim::AdamW>(optim::AdamWOptions{.lr = 1e-2, .amsgrad = true});
}

TEST(CompiledOptim, SgdNesterovMatchesEager) {
  // The first step creates the momentum buffers eagerly; the compile happens on the second.
  expect_compiled_matches_eager<optim::SGD>(
      optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
}

// A model's worth of parameters (as GPT-2's dozens of equal-sized biases and norm scales): the
// updates, independent of one another, fill kernels up to the scheduler's bounds (on the CPU,
// the arrays a loop walks) and no further, so no generated function grows with the model; the
// step still matches eager.
// The step's scalars are made again only when their value changes (on a GPU each is a fill a
// step): Adam's weight-decay factor once, its bias corrections while they move; SGD's learning
// rate once, and again after a scheduler changes it.
TEST(CompiledOptim, UnchangedStepScalarsAreNotMadeAgain) {
  auto fills = [](auto& opt) {
    Profiler p;
    opt.step();
    int64_t n = 0;
    for (const Profiler::Row& r : p.rows()) n += r.name == "full" ? r.calls : 0;
    return n;
  };
  const auto a = make(4), b = make(5);
  for (size_t i = 0; i < a.params.size(); ++i) {
    a.params[i].set_grad(a.grads[i]);
    b.params[i].set_grad(b.grads[i]);
  }
  optim::Adam adam(a.params, optim::AdamOptions{.compiled = true});
  // The first step makes each parameter's two moments (zeros_like) and the three scalars.
  EXPECT_EQ(fills(adam), static_cast<int64_t>(2 * a.params.size() + 3));
  EXPECT_EQ(fills(adam), 2);  // the bias corrections moved; 1 - lr * weight_decay did not
  optim::SGD sgd(b.params, optim::SGDOptions{.lr = 0.1, .compiled = true});
  EXPECT_EQ(fills(sgd), 1);
  EXPECT_EQ(fills(sgd), 0);
  sgd.set_lr(0.05);
  EXPECT_EQ(fills(sgd), 1);
}

TEST(CompiledOptim, ManyParametersSplitIntoBoundedKernels) {
  std::vector<Shape> shapes;
  for (int i = 0; i < 40; ++i)
    for (Shape shape : {Shape{24}, Shape{3, 8}, Shape{5}}) shapes.push_back(shape);
  auto eager = make(5, shapes), comp = make(5, shapes);
  optim::AdamWOptions options{.lr = 1e-2};
  optim::AdamW eager_opt(eager.params, options);
  options.compiled = true;
  optim::AdamW comp_opt(comp.params, options);
  int64_t kernels = 0;
  std::string log = log_of("fusion", [&] {
    for (int step = 0; step < 2; ++step) {
      for (size_t i = 0; i < eager.params.size(); ++i) {
        eager.params[i].set_grad(eager.grads[i]);
        comp.params[i].set_grad(comp.grads[i]);
      }
      eager_opt.step();
      comp_opt.step();
    }
    kernels = counters()["generated_kernels"];
  });
  for (size_t i = 0; i < eager.params.size(); ++i)
    EXPECT_TRUE(allclose(comp.params[i], eager.params[i], 1e-5, 1e-6)) << "param " << i;
  EXPECT_NE(log.find("arrays at once"), std::string::npos) << log.substr(0, 2000);
  EXPECT_NE(log.find("the combo is full"), std::string::npos) << log.substr(0, 2000);
  EXPECT_GT(kernels, 1);
}

}  // namespace
}  // namespace coil::testing
