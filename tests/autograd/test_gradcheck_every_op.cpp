// Every differentiable op passes gradcheck (float64 finite differences) on the op examples'
// inputs, and every op that takes and returns floating-point tensors either has a derivative
// or is on the short, named list of those that do not yet.
#include <gtest/gtest.h>

#include <coil/autograd.h>

#include <set>

#include "autograd/derivatives.h"
#include "autograd/record.h"
#include "graph/op_examples.h"

namespace coil::testing {
namespace {

// Ops with floating inputs and outputs whose backward is missing: calling backward through such
// an op is a clear error, never a wrong gradient. Attention's backward op is called by
// attention's rule only when that backward is not itself differentiated (create_graph takes
// the decomposed math instead), as PyTorch's fused attention backward kernels.
const std::set<std::string>& without_derivative() {
  static const std::set<std::string> s = {"scaled_dot_product_attention_backward"};
  return s;
}

bool differentiable(OpId op, const std::vector<Arg>& args) {
  return autograd::find_derivative(op) || autograd::find_autograd_composite(op, Args(args));
}

// The example as a function of its floating-point inputs (distinct names, in order).
struct Bound {
  std::vector<std::string> names;  // distinct floating inputs
  std::vector<Tensor> values;
};
Bound floating_inputs(const OpExample& ex, const std::map<std::string, Tensor>& values) {
  Bound b;
  for (const std::string& n : example_input_names(ex)) {
    if (!values.at(n).is_floating_point()) continue;
    if (std::find(b.names.begin(), b.names.end(), n) != b.names.end()) continue;
    b.names.push_back(n);
    b.values.push_back(values.at(n));
  }
  return b;
}

TEST(Gradcheck, EveryDifferentiableOp) {
  manual_seed(7);
  const auto values = example_values();
  int checked = 0;
  std::set<std::string> missing;
  for (const OpExample& ex : op_examples()) {
    if (ex.random) continue;
    const OpId op = *find_op(ex.op);
    Bound b = floating_inputs(ex, values);
    if (b.names.empty()) continue;
    std::vector<Arg> args0 = example_args(ex, values);
    normalize_args(op, args0);
    std::vector<TensorMeta> out = run_meta(op, args0);
    bool floating_out = false;
    for (const TensorMeta& m : out) floating_out = floating_out || is_floating(m.dtype);
    if (!floating_out) continue;
    if (!differentiable(op, args0)) {
      missing.insert(ex.op);
      continue;
    }
    auto fn = [&](const std::vector<Tensor>& xs) {
      auto bound = values;
      for (size_t i = 0; i < xs.size(); ++i) bound[b.names[i]] = xs[i];
      std::vector<Arg> args = example_args(ex, bound);
      // batch_norm's running statistics are state, not differentiable inputs (as in PyTorch);
      // the example passes the same tensor as weight and running_mean, so keep them fixed.
      if (op == OpId::batch_norm)
        for (size_t i : {3, 4}) args[i] = example_args(ex, values)[i];
      return call_op(op, args);
    };
    SCOPED_TRACE(ex.op);
    EXPECT_NO_THROW(gradcheck(fn, b.values, {.eps = 1e-6, .atol = 1e-5, .rtol = 1e-4})) << ex.op;
    ++checked;
  }
  EXPECT_EQ(missing, without_derivative());
  EXPECT_GT(checked, 100);
}

// Awkward shapes: broadcasting in both directions, size-1 dims, non-contiguous inputs.
TEST(Gradcheck, BroadcastingAndLayouts) {
  manual_seed(3);
  Tensor a = random({3, 1, 4}, kFloat64), b = noncontiguous(random({5, 4}, kFloat64));
  Tensor c = random({1}, kFloat64, 0.5, 2);
  auto fn = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{(x[0] * x[1] + x[1] / x[2]).sum({1}) * x[0].squeeze(1)};
  };
  EXPECT_TRUE(gradcheck(fn, {a, b, c}));
  auto views = [](const std::vector<Tensor>& x) {
    Tensor t = x[0].transpose(0, 1).slice(0, 1, std::nullopt, 2).unsqueeze(0).expand({2, -1, -1});
    return std::vector<Tensor>{(t * t).mean({0, 2}, true)};
  };
  EXPECT_TRUE(gradcheck(views, {random({4, 5}, kFloat64)}));
  auto mm_chain = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{matmul(x[0], x[1]).softmax(-1), matmul(x[2], x[1].select(1, 0))};
  };
  EXPECT_TRUE(gradcheck(
      mm_chain, {random({2, 3, 4}, kFloat64), random({4, 5}, kFloat64), random({4}, kFloat64)}));
}

// The forms the op examples do not cover: training-mode batch norm, losses with their
// options, attention with masks, cropping pads, 1-D matmuls.
TEST(Gradcheck, OptionsOfTheNnOps) {
  manual_seed(11);
  using V = std::vector<Tensor>;
  auto check = [](const char* what, auto fn, const V& inputs) {
    SCOPED_TRACE(what);
    EXPECT_NO_THROW(gradcheck([&](const V& x) { return V{fn(x)}; }, inputs)) << what;
  };
  Tensor img = random({3, 2, 3, 2}, kFloat64), c2 = random({2}, kFloat64);
  check("batch_norm training",
        [](const V& x) { return batch_norm(x[0], x[1], x[2], Tensor(), Tensor(), true); },
        {img, c2, random({2}, kFloat64)});
  Tensor running_mean = zeros({2}, kFloat64), running_var = ones({2}, kFloat64);
  check(
      "batch_norm training with running stats",
      [&](const V& x) { return batch_norm(x[0], x[1], Tensor(), running_mean, running_var, true); },
      {img, c2});
  Tensor logits = random({4, 5}, kFloat64);
  Tensor target = tensor<int64_t>({1, 0, 4, 2});
  Tensor ignored = tensor<int64_t>({1, -100, 4, 2});
  check("cross_entropy smoothing",
        [&](const V& x) { return cross_entropy(x[0], ignored, "mean", -100, 0.1); }, {logits});
  check("cross_entropy none", [&](const V& x) { return cross_entropy(x[0], target, "none"); },
        {logits});
  check("cross_entropy probabilities",
        [&](const V& x) { return cross_entropy(x[0], softmax(x[1], 1), "sum", -100, 0.2); },
        {logits, random({4, 5}, kFloat64)});
  check("cross_entropy [N, C, d]",
        [&](const V& x) {
          return cross_entropy(x[0], tensor<int64_t>({0, 2, 1, 1}, Shape{2, 2}));
        },
        {random({2, 3, 2}, kFloat64)});
  check("nll_loss ignore_index",
        [&](const V& x) { return nll_loss(log_softmax(x[0], 1), ignored, "sum"); }, {logits});
  Tensor ids = tensor<int64_t>({0, 2, 2, 1}, Shape{2, 2});
  check("embedding", [&](const V& x) { return embedding(x[0], ids) * 1.5; },
        {random({3, 4}, kFloat64)});
  // padding_idx's row gets no gradient (as in PyTorch), though the forward reads it.
  Tensor table = random({3, 4}).requires_grad_();
  embedding(table, ids, 2).sum().backward();
  EXPECT_EQ(values(table.grad().select(0, 2)), std::vector<double>(4, 0.0));
  EXPECT_EQ(values(table.grad().select(0, 0)), std::vector<double>(4, 1.0));
  Tensor q = random({2, 3, 4}, kFloat64), k = random({2, 5, 4}, kFloat64),
         v = random({2, 5, 3}, kFloat64);
  check("attention float mask",
        [](const V& x) {
          return scaled_dot_product_attention(x[0], x[1], x[2], x[3], 0.0, false, 0.7);
        },
        {q, k, v, random({3, 5}, kFloat64)});
  Tensor bool_mask = random({3, 5}) > -1.5;
  check("attention bool mask",
        [&](const V& x) { return scaled_dot_product_attention(x[0], x[1], x[2], bool_mask); },
        {q, k, v});
  check("pad crop",
        [](const V& x) {
          return pad(x[0], {-1, 2, 1, -1});
        },
        {random({3, 4}, kFloat64)});
  check("mse_loss none", [](const V& x) { return mse_loss(x[0], x[1], "none"); },
        {random({3, 4}, kFloat64), random({4}, kFloat64)});
  check("matmul vector-vector", [](const V& x) { return matmul(x[0], x[1]); },
        {random({4}, kFloat64), random({4}, kFloat64)});
  check("matmul vector-batch", [](const V& x) { return matmul(x[0], x[1]); },
        {random({4}, kFloat64), random({2, 4, 3}, kFloat64)});
  check("matmul batch-vector", [](const V& x) { return matmul(x[0], x[1]); },
        {random({2, 3, 4}, kFloat64), random({4}, kFloat64)});
  // The pools with padding, dilation, ceil_mode, count_include_pad off, uneven adaptive cells.
  Tensor planes = random({2, 3, 7, 6}, kFloat64);
  check("max_pool2d options",
        [](const V& x) {
          return max_pool2d(x[0], {3, 2}, {2, 2}, {1, 1}, {1, 2}, true);
        },
        {planes});
  check("avg_pool2d options",
        [](const V& x) {
          return avg_pool2d(x[0], {3, 3}, {2, 1}, {1, 1}, true, false);
        },
        {planes});
  check("adaptive_avg_pool2d uneven",
        [](const V& x) {
          return adaptive_avg_pool2d(x[0], {4, 5});
        },
        {planes});
  check("max_pool2d unbatched",
        [](const V& x) {
          return max_pool2d(x[0], {2, 2});
        },
        {random({3, 4, 5}, kFloat64)});
  check("index_select",
        [](const V& x) {
          return index_select(x[0], 1, tensor<int64_t>({2, 0, 2}));
        },
        {random({2, 3}, kFloat64)});
}

// as_strided over overlapping views (stride 0, sliding windows), views of non-contiguous inputs
// (transposed, narrowed with a storage offset, expanded so that elements share positions), and
// its second derivative.
TEST(Gradcheck, AsStridedLayouts) {
  manual_seed(13);
  using V = std::vector<Tensor>;
  auto check = [](const char* what, auto fn, const V& inputs) {
    SCOPED_TRACE(what);
    EXPECT_NO_THROW(gradcheck([&](const V& x) { return V{fn(x[0])}; }, inputs)) << what;
  };
  Tensor x = random({4, 5}, kFloat64);
  check("stride 0", [](const Tensor& t) { return t.as_strided({3, 4}, {0, 1}, 2); }, {x});
  check("sliding windows",
        [](const Tensor& t) {
          return t.as_strided({6, 4}, {3, 1}, 1) * t.sum();
        },
        {x});
  check("transposed input", [](const Tensor& t) { return t.t().as_strided({3, 2}, {1, 5}); }, {x});
  check("offset input, offset kept",
        [](const Tensor& t) {
          return t.narrow(0, 1, 2).as_strided({2, 3}, {2, 3});
        },
        {x});
  check("expanded input",
        [](const Tensor& t) {
          return t.select(0, 0).expand({3, 5}).as_strided({2, 4}, {1, 1});
        },
        {x});
  check("0-dim result", [](const Tensor& t) { return t.as_strided({}, {}, 7) * t; }, {x});
  // Second derivative: the gradient of sum(as_strided(t)^3) is itself differentiated.
  auto grad_of = [](const V& x) {
    EnableGradGuard grad_mode;  // gradcheck's finite differences run without grad mode
    Tensor y = x[0].as_strided({3, 3}, {2, 1}, 1);
    return V{autograd::grad({(y * y * y).sum()}, {x[0]}, {}, false, true)[0]};
  };
  EXPECT_NO_THROW(gradcheck(grad_of, {x}));
}

// Second derivatives through the pools: gradcheck of the pools' backward ops (with respect to
// the gradient and the input), and of the first gradient of a function that pools, taken with
// create_graph, against finite differences.
TEST(Gradcheck, PoolsSecondDerivatives) {
  manual_seed(17);
  using V = std::vector<Tensor>;
  auto check = [](const char* what, auto fn, const V& inputs) {
    SCOPED_TRACE(what);
    EXPECT_NO_THROW(gradcheck([&](const V& x) { return V{fn(x)}; }, inputs)) << what;
  };
  Tensor img = random({2, 3, 7, 6}, kFloat64);
  const Shape max_sizes = max_pool2d(img, {3, 2}, {2, 2}, {1, 1}, {1, 2}, true).sizes();
  Tensor g_max = random(max_sizes, kFloat64), g_avg = random({2, 3, 4, 6}, kFloat64);
  Tensor g_adaptive = random({2, 3, 4, 5}, kFloat64);
  check("max_pool2d_backward",
        [](const V& x) {
          return call_op1(OpId::max_pool2d_backward,
                          {x[0], x[1], Shape{3, 2}, Shape{2, 2}, Shape{1, 1}, Shape{1, 2}, true});
        },
        {g_max, img});
  check("avg_pool2d_backward",
        [](const V& x) {
          return call_op1(OpId::avg_pool2d_backward,
                          {x[0], x[1], Shape{3, 3}, Shape{2, 1}, Shape{1, 1}, true, false});
        },
        {g_avg, img});
  check("adaptive_avg_pool2d_backward",
        [](const V& x) {
          return call_op1(OpId::adaptive_avg_pool2d_backward, {x[0], x[1]});
        },
        {g_adaptive, img});
  check("max_pool2d_double_backward",
        [](const V& x) {
          return call_op1(OpId::max_pool2d_double_backward,
                          {x[0], x[1], Shape{3, 2}, Shape{2, 2}, Shape{1, 1}, Shape{1, 2}, true});
        },
        {random({2, 3, 7, 6}, kFloat64), img});
  // grad of grad: d/dx of (d/dx sum(w * pool(x)^2)) for each pool; the first gradient reads the
  // pool's backward op, so the second runs its rule.
  Tensor w_max = random(max_sizes, kFloat64);
  auto grad_of = [](auto pool, const Tensor& w) {
    return [pool, w](const V& x) {
      EnableGradGuard grad_mode;  // gradcheck's finite differences run without grad mode
      Tensor p = pool(x[0]);
      return V{autograd::grad({(w * p * p).sum()}, {x[0]}, {}, false, true)[0]};
    };
  };
  EXPECT_NO_THROW(gradcheck(grad_of(
                                [](const Tensor& t) {
                                  return max_pool2d(t, {3, 2}, {2, 2}, {1, 1}, {1, 2}, true);
                                },
                                w_max),
                            {img}))
      << "max_pool2d";
  EXPECT_NO_THROW(gradcheck(grad_of(
                                [](const Tensor& t) {
                                  return avg_pool2d(t, {3, 3}, {2, 1}, {1, 1}, true, false);
                                },
                                g_avg),
                            {img}))
      << "avg_pool2d";
  EXPECT_NO_THROW(gradcheck(grad_of(
                                [](const Tensor& t) {
                                  return adaptive_avg_pool2d(t, {4, 5});
                                },
                                g_adaptive),
                            {img}))
      << "adaptive_avg_pool2d";
  // The second derivative of max pooling by hand: d/dx of d/dx sum(pool(x)^2) is 2 at each
  // window's maximum (once per window that takes it), 0 elsewhere.
  Tensor x = tensor<double>({1, 5, 2, 3, 4, 0, 7, 6, 8}, Shape{1, 3, 3}).requires_grad_();
  Tensor p = max_pool2d(x, {2, 2}, {1, 1});  // windows take 5, 5, 7, 8
  Tensor dx = autograd::grad({(p * p).sum()}, {x}, {}, false, true)[0];
  EXPECT_EQ(values(dx), (std::vector<double>{0, 20, 0, 0, 0, 0, 14, 0, 16}));
  Tensor ddx = autograd::grad({dx.sum()}, {x})[0];
  EXPECT_EQ(values(ddx), (std::vector<double>{0, 4, 0, 0, 0, 0, 2, 0, 2}));
}

}  // namespace
}  // namespace coil::testing
