// Compiled training: coil::compile on inputs and parameters that require grad builds the joint
// graph, partitions it, compiles both halves, and backward() through the compiled results
// gives eager autograd's gradients.
#include <gtest/gtest.h>

#include <coil/coil.h>

#include <fstream>
#include <sstream>

#include "autograd/joint_graph.h"
#include "autograd/partitioner.h"
#include "capture/tracer.h"
#include "debug/log.h"
#include "graph/interpreter.h"
#include "ops/meta_util.h"
#include "testing.h"

namespace coil::testing {
namespace {

// loss of a two-layer MLP with a layer norm, the classic training step.
Tensor mlp_loss(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2,
                const Tensor& target) {
  Tensor h = gelu(layer_norm(linear(x, w1, b1), {w1.size(0)}));
  return cross_entropy(linear(h, w2), target);
}

struct Params {
  Tensor w1, b1, w2;
  Params() {
    manual_seed(4);
    w1 = random({16, 8}).requires_grad_();
    b1 = random({16}).requires_grad_();
    w2 = random({5, 16}).requires_grad_();
  }
  std::vector<Tensor> all() const { return {w1, b1, w2}; }
  void zero() const {
    for (const Tensor& p : all()) p.set_grad({});
  }
};

void expect_same_gradients(const std::string& backend) {
  SCOPED_TRACE(backend);
  Params p;
  Tensor x = random({12, 8}), target = randint(0, 5, {12});
  Tensor eager_loss = mlp_loss(x, p.w1, p.b1, p.w2, target);
  eager_loss.backward();
  std::vector<Tensor> eager_grads;
  for (const Tensor& t : p.all()) eager_grads.push_back(t.grad().clone());
  p.zero();

  auto step = compile(mlp_loss, CompileOptions{.backend = backend});
  for (int call = 0; call < 2; ++call) {  // the second call runs from the cache
    Tensor loss = step(x, p.w1, p.b1, p.w2, target);
    EXPECT_EQ(autograd::grad_fn_name(loss), "CompiledFunctionBackward");
    EXPECT_NEAR(loss.item<double>(), eager_loss.item<double>(), 1e-5);
    loss.backward();
    for (size_t i = 0; i < eager_grads.size(); ++i)
      EXPECT_TRUE(allclose(p.all()[i].grad(), eager_grads[i], 1e-4, 1e-5)) << "param " << i;
    p.zero();
  }
}

TEST(CompiledTraining, AotEagerMatchesEagerGradients) { expect_same_gradients("aot_eager"); }
TEST(CompiledTraining, InductorMatchesEagerGradients) { expect_same_gradients("inductor"); }

TEST(CompiledTraining, CapturedParametersGetGradients) {
  Params p;
  Tensor x = random({6, 8});
  auto model = compile([&](const Tensor& in) { return (linear(in, p.w1, p.b1).tanh() * 2).sum(); },
                       CompileOptions{.backend = "aot_eager"});
  Tensor loss = model(x);
  loss.backward();
  Tensor w1 = p.w1.detach().requires_grad_(), b1 = p.b1.detach().requires_grad_();
  (linear(x, w1, b1).tanh() * 2).sum().backward();
  EXPECT_TRUE(allclose(p.w1.grad(), w1.grad(), 1e-4, 1e-5));
  EXPECT_TRUE(allclose(p.b1.grad(), b1.grad(), 1e-4, 1e-5));
  EXPECT_FALSE(p.w2.grad().defined());
}

TEST(CompiledTraining, GradModeIsGuarded) {
  compiler_reset();
  Tensor w = random({4}).requires_grad_();
  auto f = compile([](const Tensor& a) { return (a * a).sum(); },
                   CompileOptions{.backend = "aot_eager"});
  EXPECT_TRUE(f(w).requires_grad());
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(f(w).requires_grad());
  }
  EXPECT_EQ(counters()["recompiles"], 1);
  Tensor loss = f(w);
  loss.backward();
  EXPECT_TRUE(allclose(w.grad(), w.detach() * 2));
}

TEST(CompiledTraining, DropoutMasksAgreeBetweenForwardAndBackward) {
  manual_seed(9);
  Tensor x = random({256}, kFloat32, 1, 2).requires_grad_();
  auto f = compile([](const Tensor& a) { return dropout(a * 3, 0.5, true); },
                   CompileOptions{.backend = "aot_eager"});
  Tensor y = f(x);
  y.sum().backward();
  std::vector<double> yv = values(y), gv = values(x.grad());
  int kept = 0;
  for (size_t i = 0; i < yv.size(); ++i) {
    kept += yv[i] != 0;
    EXPECT_NEAR(gv[i], yv[i] != 0 ? 6.0 : 0.0, 1e-5) << i;
  }
  EXPECT_GT(kept, 80);
  EXPECT_LT(kept, 176);
}

// The partitioner recomputes a cheap pointwise chain instead of saving its intermediates, and
// never recomputes the matmul.
TEST(CompiledTraining, PartitionerRecomputesCheapPointwise) {
  Graph fwd;
  TensorMeta m = ops::contiguous_meta(kFloat32, {64, 64}, kCPU);
  Node* x = fwd.placeholder("x", m);
  Node* w = fwd.placeholder("w", m);
  Node* mm = fwd.call(OpId::mm, {x, w});
  Node* a = fwd.call(OpId::sin, {mm});
  Node* b = fwd.call(OpId::exp, {a});
  Node* c = fwd.call(OpId::mul, {b, a});
  fwd.output({fwd.call(OpId::sum, {c})});
  autograd::JointGraph joint = autograd::build_joint_graph(fwd, {true, true}, 1);
  autograd::Partition p = autograd::partition(joint);
  std::string report = p.report();
  EXPECT_LT(p.saved_bytes, p.save_everything_bytes) << report;
  EXPECT_FALSE(p.recomputed_names.empty()) << report;
  for (const std::string& n : p.recomputed_names) EXPECT_NE(n.rfind("mm", 0), 0u) << report;
  // Saved: the inputs (for mm's backward) and mm itself (for sin's), nothing else.
  EXPECT_EQ(p.saved_bytes, 3 * 64 * 64 * 4) << report;
  // Both halves run and give eager's gradients.
  Tensor xv = random({64, 64}), wv = random({64, 64});
  std::vector<Tensor> fo = interpret(*p.forward, {xv, wv});
  std::vector<Tensor> bw_in(fo.begin() + 1, fo.end());
  bw_in.push_back(ones({}));
  std::vector<Tensor> grads = interpret(*p.backward, bw_in);
  Tensor xe = xv.clone().requires_grad_(), we = wv.clone().requires_grad_();
  Tensor ae = coil::mm(xe, we).sin();
  (ae.exp() * ae).sum().backward();
  EXPECT_TRUE(allclose(grads[0], xe.grad(), 1e-4, 1e-4));
  EXPECT_TRUE(allclose(grads[1], we.grad(), 1e-4, 1e-4));
}

TEST(CompiledTraining, LogsTheGraphsAndThePartition) {
  const std::string path = ::testing::TempDir() + "coil_aot_log.txt";
  setenv("COIL_LOGS", "aot_graphs,partitioner", 1);
  setenv("COIL_LOG_FILE", path.c_str(), 1);
  debug::reload_log_settings();
  Tensor w = random({3}).requires_grad_();
  auto f = compile([](const Tensor& a) { return (a.sin() * a).sum(); },
                   CompileOptions{.backend = "aot_eager", .name = "logged"});
  f(w).backward();
  unsetenv("COIL_LOGS");
  unsetenv("COIL_LOG_FILE");
  debug::reload_log_settings();
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  EXPECT_NE(text.str().find("joint graph"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("tangent_0"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("backward graph"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("[partitioner]"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("bytes"), std::string::npos) << text.str();
}

}  // namespace
}  // namespace coil::testing
