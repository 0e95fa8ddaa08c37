// Compiled training: coil::compile on inputs and parameters that require grad builds the joint
// graph, partitions it, compiles both halves, and backward() through the compiled results
// gives eager autograd's gradients.
#include <gtest/gtest.h>

#include <coil/coil.h>

#include <fstream>
#include <sstream>

#include "aot/joint_graph.h"
#include "aot/partitioner.h"
#include "capture/tracer.h"
#include "compile/stages.h"
#include "debug/log.h"
#include "graph/interpreter.h"
#include "graph/printer.h"
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

// A symbolic batch: one joint graph, both halves compiled over s0, serves every batch size
// (the last batch of an epoch is smaller), with eager's loss and gradients at each.
void expect_one_graph_for_every_batch(const std::string& backend) {
  SCOPED_TRACE(backend);
  compiler_reset();
  Params p;
  auto step = compile(mlp_loss, CompileOptions{.backend = backend, .dynamic = true});
  for (int64_t batch : {12, 7, 33, 2}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    Tensor x = random({batch, 8}), target = randint(0, 5, {batch});
    Tensor eager_loss = mlp_loss(x, p.w1, p.b1, p.w2, target);
    eager_loss.backward();
    std::vector<Tensor> eager_grads;
    for (const Tensor& t : p.all()) eager_grads.push_back(t.grad().clone());
    p.zero();
    Tensor loss = step(x, p.w1, p.b1, p.w2, target);
    EXPECT_NEAR(loss.item<double>(), eager_loss.item<double>(), 1e-5);
    loss.backward();
    for (size_t i = 0; i < eager_grads.size(); ++i)
      EXPECT_TRUE(allclose(p.all()[i].grad(), eager_grads[i], 1e-4, 1e-5)) << "param " << i;
    p.zero();
  }
  EXPECT_EQ(counters()["captures"], 1);
}

TEST(CompiledTraining, SymbolicBatchServesEveryBatchSize) {
  expect_one_graph_for_every_batch("aot_eager");
  expect_one_graph_for_every_batch("inductor");
}

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
  aot::JointGraph joint = aot::build_joint_graph(fwd, {true, true}, 1);
  aot::Partition p = aot::partition(joint);
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

// An MLP's GELU output, which the forward's second product wrote and the backward's product for
// that layer's weight reads again, is saved rather than recomputed (recomputing it would write
// it again in the backward); the weights' gradients come out contiguous, as the weights are
// (the products made transposed), and match eager.
TEST(CompiledTraining, PartitionerSavesWhatABackwardProductReads) {
  Graph fwd;
  Node* x = fwd.placeholder("x", ops::contiguous_meta(kFloat32, {16, 8}, kCPU));
  Node* w1 = fwd.placeholder("w1", ops::contiguous_meta(kFloat32, {32, 8}, kCPU));
  Node* w2 = fwd.placeholder("w2", ops::contiguous_meta(kFloat32, {8, 32}, kCPU));
  Node* h = fwd.call(OpId::mm, {x, fwd.call(OpId::permute, {w1, Shape{1, 0}})});
  Node* a = fwd.call(OpId::gelu, {h, std::string("none")});
  Node* y = fwd.call(OpId::mm, {a, fwd.call(OpId::permute, {w2, Shape{1, 0}})});
  fwd.output({fwd.call(OpId::sum, {fwd.call(OpId::mul, {y, y})})});
  aot::JointGraph joint = aot::build_joint_graph(fwd, {false, true, true}, 1);
  aot::Partition p = aot::partition(joint);
  const std::string report = p.report() + "\n" + print_graph(*p.backward);
  for (const std::string& n : p.recomputed_names)
    EXPECT_EQ(n.find("gelu"), std::string::npos) << report;
  bool saved_gelu = false;
  for (Node* n : p.backward->placeholders())
    saved_gelu |= n->name().find("gelu") != std::string::npos;
  EXPECT_TRUE(saved_gelu) << report;
  const std::vector<Node*>& grads = p.backward->output_node()->results();
  ASSERT_EQ(grads.size(), 2u) << report;
  for (Node* gr : grads) EXPECT_TRUE(gr->tensor_meta().is_contiguous()) << report;
  Tensor xv = random({16, 8}), w1v = random({32, 8}), w2v = random({8, 32});
  std::vector<Tensor> fo = interpret(*p.forward, {xv, w1v, w2v});
  std::vector<Tensor> bw_in(fo.begin() + 1, fo.end());
  bw_in.push_back(ones({}));
  std::vector<Tensor> got = interpret(*p.backward, bw_in);
  Tensor w1e = w1v.clone().requires_grad_(), w2e = w2v.clone().requires_grad_();
  Tensor ye = linear(gelu(linear(xv, w1e)), w2e);
  // Eager's rule makes the same choice: the gradients as the rules return them, before any
  // accumulation into .grad could copy them.
  std::vector<Tensor> eager = autograd::grad({(ye * ye).sum()}, {w1e, w2e});
  EXPECT_TRUE(eager[0].is_contiguous());
  EXPECT_TRUE(eager[1].is_contiguous());
  EXPECT_TRUE(allclose(got[0], eager[0], 1e-4, 1e-4));
  EXPECT_TRUE(allclose(got[1], eager[1], 1e-4, 1e-4));
}

// An embedding's weight gradient is scattered into zeros that depend on nothing: the backward
// makes them where it reads them, instead of the forward making and saving a weight-sized
// tensor (GPT-2's 154 MB embedding, alive from the forward to the backward).
TEST(CompiledTraining, PartitionerMakesFactoriesInTheBackward) {
  Graph fwd;
  Node* w = fwd.placeholder("w", ops::contiguous_meta(kFloat32, {50, 8}, kCPU));
  Node* idx = fwd.placeholder("idx", ops::contiguous_meta(kInt64, {12}, kCPU));
  Node* e = fwd.call(OpId::embedding, {w, idx, int64_t{-1}});
  fwd.output({fwd.call(OpId::sum, {fwd.call(OpId::mul, {e, e})})});
  aot::JointGraph joint = aot::build_joint_graph(fwd, {true, false}, 1);
  aot::Partition p = aot::partition(joint);
  const std::string report = p.report() + "\n" + print_graph(*p.backward);
  for (Node* n : p.backward->placeholders())
    EXPECT_NE(n->tensor_meta().sizes, (Shape{50, 8})) << report;
  bool scattered = false;
  for (Node* n : p.backward->nodes())
    scattered |= n->kind() == NodeKind::Call && n->op() == OpId::scatter_add;
  EXPECT_TRUE(scattered) << report;
  Tensor wv = random({50, 8}), iv = randint(0, 50, {12});
  std::vector<Tensor> fo = interpret(*p.forward, {wv, iv});
  std::vector<Tensor> bw_in(fo.begin() + 1, fo.end());
  bw_in.push_back(ones({}));
  std::vector<Tensor> got = interpret(*p.backward, bw_in);
  Tensor we = wv.clone().requires_grad_();
  Tensor ee = embedding(we, iv);
  (ee * ee).sum().backward();
  EXPECT_TRUE(allclose(got[0], we.grad(), 1e-5, 1e-5));
}

// A loss's softmax gradient is recomputed in the backward from the logits (which the product
// wrote anyway) and the rows' max and sum: the forward saves no [rows, classes] value of its
// own, and the one-hot targets are a comparison the backward's kernel computes, not a scatter.
TEST(CompiledTraining, CrossEntropySavesTheLogitsNotTheirGradient) {
  Graph fwd;
  Node* x = fwd.placeholder("x", ops::contiguous_meta(kFloat32, {64, 32}, kCPU));
  Node* w = fwd.placeholder("w", ops::contiguous_meta(kFloat32, {32, 1000}, kCPU));
  Node* t = fwd.placeholder("t", ops::contiguous_meta(kInt64, {64}, kCPU));
  Node* logits = fwd.call(OpId::mm, {x, w});
  fwd.output({fwd.call(OpId::cross_entropy, {logits, t, std::string("mean"), int64_t{-100}, 0.0})});
  aot::JointGraph joint = aot::build_joint_graph(fwd, {true, true, false}, 1);
  debug::CompileTrace trace("ce", "ce", CompileOptions{}, {});
  stages::decompositions(*joint.graph, trace);
  stages::joint_graph(*joint.graph, trace);
  aot::Partition p = aot::partition(joint);
  const std::string report = p.report() + "\n" + print_graph(*p.backward);
  int wide = 0;
  for (Node* n : p.backward->placeholders()) {
    if (n->tensor_meta().sizes != Shape{64, 1000}) continue;
    ++wide;
    EXPECT_EQ(n->name().rfind("saved_mm", 0), 0u) << report;
  }
  EXPECT_EQ(wide, 1) << report;
  for (Node* n : p.backward->nodes())
    EXPECT_FALSE(n->kind() == NodeKind::Call && n->op() == OpId::scatter_add) << report;
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

// as_strided's rule (storage positions built with arange, scatter_add and index_select) traced
// into the joint graph, with overlapping windows, and a pool behind it.
TEST(CompiledTraining, AsStridedGradientsMatchEager) {
  manual_seed(5);
  Tensor x0 = random({2, 18});
  auto f = [](const Tensor& x) {
    Tensor windows = (x * 1.5).as_strided({2, 3, 4, 3}, {18, 4, 2, 1}, 1);
    return (max_pool2d(windows, {2, 2}, {1, 1}).tanh() * windows.sum({1, 2, 3}, true)).sum();
  };
  Tensor xe = x0.clone().requires_grad_();
  f(xe).backward();
  for (const char* backend : {"aot_eager", "inductor"}) {
    SCOPED_TRACE(backend);
    auto compiled = compile(f, CompileOptions{.backend = backend});
    Tensor x = x0.clone().requires_grad_();
    Tensor loss = compiled(x);
    EXPECT_EQ(autograd::grad_fn_name(loss), "CompiledFunctionBackward");
    loss.backward();
    EXPECT_TRUE(allclose(x.grad(), xe.grad(), 1e-4, 1e-5));
  }
}

// Second derivatives through a compiled function (a gradient penalty): under create_graph the
// compiled function's backward is its captured forward replayed through eager autograd, so the
// penalty's gradients match eager ones, for primal inputs and captured parameters alike, and
// with an eager term beside the compiled one.
struct PenaltyStep {
  double loss = 0;
  Tensor x_grad, w_grad, b_grad;
};

void expect_double_backward_matches_eager(const std::string& backend) {
  SCOPED_TRACE(backend);
  manual_seed(21);
  Tensor w = random({5, 4}, kFloat64).requires_grad_();
  Tensor b = random({5}, kFloat64).requires_grad_();
  Tensor x0 = random({3, 4}, kFloat64);
  auto model = [&](const Tensor& x) {
    Tensor h = gelu(layer_norm(linear(x, w, b), {5}));
    return (h * h * x.sum({1}, true)).sum();
  };
  auto step = [&](const std::function<Tensor(const Tensor&)>& f) {
    Tensor x = x0.clone().requires_grad_();
    Tensor y = f(x) + x.sin().sum();
    std::vector<Tensor> g = autograd::grad({y}, {x, w}, {}, false, /*create_graph=*/true);
    Tensor loss = (g[0] * g[0]).sum() + (g[1] * g[1]).sum() + y;
    loss.backward();
    PenaltyStep r{loss.item<double>(), x.grad(), w.grad().clone(), b.grad().clone()};
    w.set_grad({});
    b.set_grad({});
    return r;
  };
  PenaltyStep eager = step(model);
  auto compiled = compile(model, CompileOptions{.backend = backend, .name = "penalised"});
  for (int call = 0; call < 2; ++call) {  // the second call runs from the cache
    PenaltyStep c = step([&](const Tensor& x) { return compiled(x); });
    EXPECT_NEAR(c.loss, eager.loss, 1e-9 * std::abs(eager.loss));
    EXPECT_TRUE(allclose(c.x_grad, eager.x_grad, 1e-9, 1e-9)) << values(c.x_grad)[0];
    EXPECT_TRUE(allclose(c.w_grad, eager.w_grad, 1e-9, 1e-9)) << values(c.w_grad)[0];
    EXPECT_TRUE(allclose(c.b_grad, eager.b_grad, 1e-9, 1e-9)) << values(c.b_grad)[0];
  }
  // The first gradient, taken through the compiled function, against finite differences.
  auto first_gradient = [&](const std::vector<Tensor>& x) {
    EnableGradGuard grad_mode;  // gradcheck's finite differences run without grad mode
    return autograd::grad({compiled(x[0])}, {x[0]}, {}, false, true);
  };
  EXPECT_NO_THROW(gradcheck(first_gradient, {x0}));
}

TEST(CompiledTraining, AotEagerDoubleBackwardMatchesEager) {
  expect_double_backward_matches_eager("aot_eager");
}
TEST(CompiledTraining, InductorDoubleBackwardMatchesEager) {
  expect_double_backward_matches_eager("inductor");
}

// Inputs that depend on each other, or are one tensor passed twice: each input's gradient is
// its own, so the second derivative counts every path once.
TEST(CompiledTraining, DoubleBackwardThroughDependentInputs) {
  auto h = [](const Tensor& p, const Tensor& q) { return (p * q).sin().sum(); };
  auto compiled = compile(h, CompileOptions{.backend = "aot_eager"});
  Tensor a0 = tensor<double>({0.3, -1.2, 0.7});
  for (int same = 0; same < 2; ++same) {
    auto second = [&](auto&& f) {
      Tensor a = a0.clone().requires_grad_();
      Tensor b = same ? a : a * 2;
      Tensor g = autograd::grad({f(a, b)}, {a}, {}, false, true)[0];
      return autograd::grad({g.sum()}, {a})[0];
    };
    Tensor eager = second(h);
    Tensor got = second([&](const Tensor& p, const Tensor& q) { return compiled(p, q); });
    EXPECT_TRUE(allclose(got, eager, 1e-12, 1e-12)) << same;
  }
}

// The replay for a second derivative does not update batch norm's running statistics again.
TEST(CompiledTraining, DoubleBackwardThroughBatchNormUpdatesRunningStatsOnce) {
  manual_seed(8);
  Tensor x0 = random({4, 3, 2, 2}, kFloat64), weight = random({3}, kFloat64).requires_grad_();
  auto run = [&](auto&& f, const Tensor& mean) {
    Tensor x = x0.clone().requires_grad_();
    Tensor g = autograd::grad({f(x, mean)}, {x}, {}, false, /*create_graph=*/true)[0];
    (g * g).sum().backward();
    Tensor r = weight.grad().clone();
    weight.set_grad({});
    return r;
  };
  auto f = [&](const Tensor& x, const Tensor& mean) {
    Tensor var = ones({3}, kFloat64);
    return (batch_norm(x, weight, Tensor(), mean, var, true).pow(3) * x).sum();
  };
  Tensor eager_mean = zeros({3}, kFloat64), compiled_mean = zeros({3}, kFloat64);
  Tensor eager = run(f, eager_mean);
  auto compiled = compile(f, CompileOptions{.backend = "aot_eager"});
  Tensor got = run([&](const Tensor& x, const Tensor& m) { return compiled(x, m); }, compiled_mean);
  EXPECT_TRUE(allclose(got, eager, 1e-10, 1e-10));
  EXPECT_TRUE(allclose(compiled_mean, eager_mean, 1e-12, 1e-12)) << values(compiled_mean)[0];
  EXPECT_GT(std::abs(values(eager_mean)[0]), 0);
}

// A forward that draws random numbers cannot be replayed for a second derivative: a clear error
// naming the function, not a wrong gradient.
TEST(CompiledTraining, DoubleBackwardThroughDropoutIsAClearError) {
  Tensor x = random({16}).requires_grad_();
  auto f = compile([](const Tensor& a) { return dropout(a * 3, 0.5, true).pow(2).sum(); },
                   CompileOptions{.backend = "aot_eager", .name = "noisy"});
  Tensor y = f(x);
  try {
    autograd::grad({y}, {x}, {}, false, /*create_graph=*/true);
    FAIL() << "double backward through a compiled dropout should throw";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("double backward through compiled function 'noisy'"), std::string::npos)
        << what;
    EXPECT_NE(what.find("draws random numbers"), std::string::npos) << what;
  }
  // The first-order backward is unaffected.
  f(x).backward();
  EXPECT_TRUE(x.grad().defined());
}

}  // namespace
// A batch against a matrix (a language model's head, x (B, T, C) @ W (C, V)): the weight's
// gradient is one product over the batch folded into rows, as the forward's, not a product per
// batch element (B copies of W's size) summed afterwards; it matches float64 eager.
TEST(CompiledTraining, BatchAgainstMatrixGradientIsOneProduct) {
  Tensor x = random({4, 5, 6}), w = random({6, 7});
  auto f = compile([](const Tensor& a, const Tensor& b) { return coil::matmul(a, b).sin().sum(); });
  Tensor xc = x.clone().requires_grad_(), wc = w.clone().requires_grad_();
  const std::string log = log_of("aot_graphs", [&] { f(xc, wc).backward(); });
  const std::string backward = log.substr(log.find("backward graph"));
  EXPECT_EQ(backward.find("bmm"), std::string::npos) << backward;
  EXPECT_NE(backward.find("coil.mm"), std::string::npos) << backward;
  Tensor x64 = x.to(kFloat64).requires_grad_(), w64 = w.to(kFloat64).requires_grad_();
  coil::matmul(x64, w64).sin().sum().backward();
  EXPECT_TRUE(allclose(wc.grad().to(kFloat64), w64.grad(), 1e-5, 1e-6));
  EXPECT_TRUE(allclose(xc.grad().to(kFloat64), x64.grad(), 1e-5, 1e-6));
}

}  // namespace coil::testing
