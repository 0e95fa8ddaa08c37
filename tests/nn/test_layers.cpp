// The layers' forward passes against float64 references computed in the test (or against the
// eager op they wrap), their initialisation and their errors.
#include <cmath>

#include "testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

// max |v| of a tensor.
double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : values(t)) m = std::max(m, std::fabs(v));
  return m;
}

}  // namespace

TEST(NnLayers, LinearMatchesHandComputedProduct) {
  manual_seed(0);
  nn::Linear lin(3, 2);
  Tensor x = random({4, 3});
  std::vector<double> w = values(lin.weight), b = values(lin.bias), xv = values(x), ref;
  for (int i = 0; i < 4; ++i)
    for (int o = 0; o < 2; ++o) {
      double s = b[o];
      for (int k = 0; k < 3; ++k) s += xv[i * 3 + k] * w[o * 3 + k];
      ref.push_back(s);
    }
  expect_close(lin.forward(x), ref, {4, 2});
  expect_close(lin(noncontiguous(x)), ref, {4, 2});
  EXPECT_EQ(lin.forward(random({2, 5, 3})).sizes(), (Shape{2, 5, 2}));
  EXPECT_COIL_ERROR(lin.forward(random({4, 5})), "expected an input whose last dim is 3");
}

TEST(NnLayers, LinearAndConvInitialisationBounds) {
  manual_seed(3);
  nn::Linear lin(16, 32);
  EXPECT_EQ(lin.weight.sizes(), (Shape{32, 16}));
  EXPECT_LE(max_abs(lin.weight), 1 / std::sqrt(16.0));
  EXPECT_GT(max_abs(lin.weight), 0.8 / std::sqrt(16.0));  // spread over the range
  EXPECT_LE(max_abs(lin.bias), 1 / std::sqrt(16.0));
  nn::Conv2d conv(4, 6, 3, {.groups = 2});
  EXPECT_EQ(conv.weight.sizes(), (Shape{6, 2, 3, 3}));
  EXPECT_LE(max_abs(conv.weight), 1 / std::sqrt(18.0));
  EXPECT_LE(max_abs(conv.bias), 1 / std::sqrt(18.0));
  // Seeded: the same seed gives the same weights.
  manual_seed(3);
  nn::Linear again(16, 32);
  EXPECT_TRUE(equal(again.weight, lin.weight));
  nn::Embedding emb(1000, 8);
  std::vector<double> e = values(emb.weight);
  double mean = 0, sq = 0;
  for (double v : e) mean += v / double(e.size());
  for (double v : e) sq += (v - mean) * (v - mean) / double(e.size());
  EXPECT_NEAR(mean, 0, 0.05);
  EXPECT_NEAR(sq, 1, 0.1);  // N(0, 1)
}

TEST(NnLayers, InitFunctions) {
  Tensor t = empty({64, 32});
  nn::init::xavier_uniform_(t);
  EXPECT_LE(max_abs(t), std::sqrt(6.0 / 96));
  nn::init::constant_(t, 0.5);
  EXPECT_TRUE(equal(t, full({64, 32}, 0.5)));
  nn::init::kaiming_uniform_(t, 0, "fan_out", "relu");
  EXPECT_LE(max_abs(t), std::sqrt(2.0) * std::sqrt(3.0 / 64));
  EXPECT_NEAR(nn::init::calculate_gain("tanh"), 5.0 / 3, 1e-12);
  EXPECT_COIL_ERROR(nn::init::calculate_gain("swish"), "unsupported nonlinearity");
  EXPECT_COIL_ERROR(nn::init::xavier_uniform_(empty({3})), "fewer than 2 dimensions");
  EXPECT_COIL_ERROR(nn::init::normal_(empty({3}, kInt64)), "expected a floating-point tensor");
}

TEST(NnLayers, Conv2dMatchesTheOp) {
  manual_seed(1);
  nn::Conv2d conv(2, 4, {3, 2}, {.stride = {2}, .padding = {1, 0}});
  Tensor x = random({2, 2, 7, 6});
  Tensor ref = conv2d(x, conv.weight, conv.bias, {2, 2}, {1, 0});
  EXPECT_TRUE(equal(conv.forward(x), ref));
  // Unbatched (C, H, W): a batch of one, whose convolution may take another of oneDNN's forms.
  EXPECT_TRUE(allclose(conv.forward(x[0]), ref[0], 1e-6, 1e-6));
  EXPECT_EQ(conv.str(), "Conv2d(2, 4, kernel_size=(3, 2), stride=(2, 2), padding=(1, 0))");
  EXPECT_COIL_ERROR(conv.forward(random({2, 3, 7, 6})), "expected an input of shape (N, 2, H, W)");
  EXPECT_COIL_ERROR(nn::Conv2d(3, 4, 3, {.groups = 2}), "must be positive and divide");
  EXPECT_COIL_ERROR(nn::Conv2d(3, 4, 3, {.stride = {1, 2, 3}}), "stride takes one value or two");
}

TEST(NnLayers, BatchNorm2dTrainingUpdatesRunningStats) {
  manual_seed(2);
  nn::BatchNorm2d bn(3);
  EXPECT_EQ(bn.state_dict().keys(),
            (std::vector<std::string>{"weight", "bias", "running_mean", "running_var",
                                      "num_batches_tracked"}));
  Tensor x = random({4, 3, 2, 5}, kFloat32, -1, 3);
  Tensor y = bn.forward(x);
  // Reference: per channel, batch mean and biased variance normalise; the running statistics
  // move by momentum 0.1 towards the mean and the unbiased variance.
  std::vector<double> xv = values(x), yv = values(y);
  for (int c = 0; c < 3; ++c) {
    double mean = 0, var = 0;
    const int count = 4 * 10;
    for (int n = 0; n < 4; ++n)
      for (int s = 0; s < 10; ++s) mean += xv[(n * 3 + c) * 10 + s] / count;
    for (int n = 0; n < 4; ++n)
      for (int s = 0; s < 10; ++s) var += std::pow(xv[(n * 3 + c) * 10 + s] - mean, 2) / count;
    for (int n = 0; n < 4; ++n)
      for (int s = 0; s < 10; ++s) {
        int i = (n * 3 + c) * 10 + s;
        EXPECT_NEAR(yv[i], (xv[i] - mean) / std::sqrt(var + 1e-5), 1e-4);
      }
    EXPECT_NEAR(values(bn.running_mean)[c], 0.1 * mean, 1e-5);
    EXPECT_NEAR(values(bn.running_var)[c], 0.9 + 0.1 * var * count / (count - 1), 1e-5);
  }
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
  bn.forward(x);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 2);

  // Evaluation normalises by the running statistics and leaves them alone.
  bn.eval();
  Tensor rm = bn.running_mean.clone(), rv = bn.running_var.clone();
  Tensor ye = bn.forward(x);
  EXPECT_TRUE(equal(bn.running_mean, rm));
  Tensor ref = (x - rm.view({1, 3, 1, 1})) / (rv.view({1, 3, 1, 1}) + 1e-5).sqrt();
  EXPECT_TRUE(allclose(ye, ref, 1e-5, 1e-5));
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 2);
  EXPECT_COIL_ERROR(bn.forward(random({4, 3, 5})), "expected a 4-D input (N, C, H, W)");
  EXPECT_COIL_ERROR(bn.forward(random({4, 2, 5, 5})), "expected 3 channels");
}

TEST(NnLayers, BatchNorm2dCumulativeAverageAndUntracked) {
  nn::BatchNorm2d bn(2, {.momentum = std::nullopt});
  Tensor a = random({3, 2, 2, 2}), b = random({3, 2, 2, 2});
  bn.forward(a);
  bn.forward(b);
  // momentum=None: the running mean is the plain average of the batch means.
  Tensor expected = (a.mean({0, 2, 3}) + b.mean({0, 2, 3})) / 2;
  EXPECT_TRUE(allclose(bn.running_mean, expected, 1e-5, 1e-6));

  nn::BatchNorm2d free(2, {.affine = false, .track_running_stats = false});
  EXPECT_TRUE(free.parameters().empty());
  EXPECT_TRUE(free.state_dict().empty());
  free.eval();  // no running statistics: batch statistics even in evaluation
  Tensor y = free.forward(a);
  EXPECT_TRUE(allclose(y.mean({0, 2, 3}), zeros({2}), 1e-5, 1e-5));
}

TEST(NnLayers, LayerNormAndRMSNorm) {
  manual_seed(4);
  Tensor x = random({3, 4, 6});
  nn::LayerNorm ln(6);
  EXPECT_TRUE(equal(ln.weight, ones({6})));
  EXPECT_TRUE(equal(ln.bias, zeros({6})));
  std::vector<double> xv = values(x), ref;
  for (int r = 0; r < 12; ++r) {
    double mean = 0, var = 0;
    for (int j = 0; j < 6; ++j) mean += xv[r * 6 + j] / 6;
    for (int j = 0; j < 6; ++j) var += std::pow(xv[r * 6 + j] - mean, 2) / 6;
    for (int j = 0; j < 6; ++j) ref.push_back((xv[r * 6 + j] - mean) / std::sqrt(var + 1e-5));
  }
  expect_close(ln.forward(x), ref, {3, 4, 6}, 1e-5, 1e-5);

  nn::LayerNorm ln2({4, 6}, {.eps = 1e-3, .bias = false});
  EXPECT_FALSE(ln2.bias.defined());
  EXPECT_TRUE(equal(ln2.forward(x), layer_norm(x, {4, 6}, ln2.weight, {}, 1e-3)));
  EXPECT_COIL_ERROR(ln2.forward(random({3, 6, 4})), "trailing dims must be [4, 6]");

  nn::RMSNorm rms(6, {.eps = 1e-6});
  std::vector<double> rref;
  for (int r = 0; r < 12; ++r) {
    double ms = 0;
    for (int j = 0; j < 6; ++j) ms += xv[r * 6 + j] * xv[r * 6 + j] / 6;
    for (int j = 0; j < 6; ++j) rref.push_back(xv[r * 6 + j] / std::sqrt(ms + 1e-6));
  }
  expect_close(rms.forward(x), rref, {3, 4, 6}, 1e-5, 1e-5);
  EXPECT_EQ(rms.state_dict().keys(), std::vector<std::string>{"weight"});
}

TEST(NnLayers, EmbeddingLooksUpRows) {
  manual_seed(5);
  nn::Embedding emb(10, 3, {.padding_idx = -1});
  EXPECT_EQ(emb.padding_idx, 9);
  EXPECT_TRUE(equal(emb.weight[9], zeros({3})));
  Tensor idx = tensor<int64_t>({1, 9, 4, 1}, Shape{2, 2});
  Tensor y = emb.forward(idx);
  EXPECT_EQ(y.sizes(), (Shape{2, 2, 3}));
  EXPECT_TRUE(equal(y[0][0], emb.weight[1]));
  EXPECT_TRUE(equal(y[1][0], emb.weight[4]));
  EXPECT_COIL_ERROR(emb.forward(ones({2})), "indices must be integers");
  EXPECT_COIL_ERROR(nn::Embedding(10, 3, {.padding_idx = 10}), "padding_idx 10");

  Tensor table = random({5, 2});
  auto frozen = nn::Embedding::from_pretrained(table);
  EXPECT_FALSE(frozen->weight.requires_grad());
  EXPECT_TRUE(frozen->weight.shares_storage(table));
  EXPECT_TRUE(equal(frozen->forward(tensor<int64_t>({3})), table.narrow(0, 3, 1)));
  EXPECT_TRUE(nn::Embedding::from_pretrained(table, false)->weight.requires_grad());
}

TEST(NnLayers, ActivationsDropoutAndFlatten) {
  Tensor x = random({4, 5});
  EXPECT_TRUE(equal(nn::ReLU().forward(x), relu(x)));
  EXPECT_TRUE(equal(nn::GELU().forward(x), gelu(x)));
  EXPECT_TRUE(equal(nn::GELU("tanh").forward(x), gelu(x, "tanh")));
  EXPECT_TRUE(equal(nn::SiLU().forward(x), silu(x)));
  EXPECT_TRUE(equal(nn::Tanh().forward(x), tanh(x)));
  EXPECT_TRUE(equal(nn::Sigmoid().forward(x), sigmoid(x)));
  EXPECT_TRUE(equal(nn::Identity().forward(x), x));
  EXPECT_COIL_ERROR(nn::GELU("fast"), "approximate must be \"none\" or \"tanh\"");

  nn::Dropout drop(0.5);
  Tensor big = ones({1000});
  Tensor y = drop.forward(big);
  int zeros_seen = 0;
  for (double v : values(y)) {
    EXPECT_TRUE(v == 0 || v == 2) << v;
    zeros_seen += v == 0;
  }
  EXPECT_GT(zeros_seen, 400);
  EXPECT_LT(zeros_seen, 600);
  drop.eval();
  EXPECT_TRUE(equal(drop.forward(big), big));
  EXPECT_COIL_ERROR(nn::Dropout(1.5), "must be in [0, 1]");

  EXPECT_EQ(nn::Flatten().forward(random({2, 3, 4})).sizes(), (Shape{2, 12}));
}

TEST(NnLayers, SequentialAndModuleList) {
  auto l1 = std::make_shared<nn::Linear>(4, 8);
  auto l2 = std::make_shared<nn::Linear>(8, 2);
  nn::Sequential seq(l1, std::make_shared<nn::ReLU>(), l2);
  Tensor x = random({3, 4});
  EXPECT_TRUE(equal(seq.forward(x), l2->forward(relu(l1->forward(x)))));
  EXPECT_EQ(seq.size(), 3u);
  EXPECT_EQ(seq[-1].get(), l2.get());
  EXPECT_EQ(seq.at<nn::Linear>(0)->out_features, 8);
  EXPECT_COIL_ERROR(seq.at<nn::Linear>(1), "module 1 is a ReLU");
  EXPECT_COIL_ERROR(seq[3], "index 3 is out of range for 3 modules");
  EXPECT_TRUE(equal(nn::Sequential().forward(x), x));

  nn::Sequential named({{"encoder", l1}, {"act", std::make_shared<nn::GELU>()}});
  EXPECT_EQ(named.named_parameters()[0].first, "encoder.weight");

  nn::ModuleList list;
  list.push_back(std::make_shared<nn::Linear>(2, 2));
  list.push_back(std::make_shared<nn::Linear>(2, 2));
  EXPECT_EQ(list.parameters().size(), 4u);
  EXPECT_EQ(list.named_parameters()[2].first, "1.weight");
  int n = 0;
  for (const auto& m : list) n += m->name() == "Linear";
  EXPECT_EQ(n, 2);
  EXPECT_COIL_ERROR(list.forward(x), "ModuleList has no forward");
}

// Multi-head attention in float64 with plain loops: per batch and head, softmax(q k^T / sqrt(d)
// + mask) v, with PyTorch's in_proj / out_proj layout.
namespace {
// `weights`, when given, receives the attention weights (N, H, L, S).
std::vector<double> mha_reference(const nn::MultiheadAttention& mha, const Tensor& q,
                                  const Tensor& k, const Tensor& v, const Tensor& blocked,
                                  std::vector<double>* weights = nullptr) {
  const int64_t n = q.size(0), l = q.size(1), s = k.size(1), e = mha.embed_dim, h = mha.num_heads,
                d = mha.head_dim;
  std::vector<double> w = values(mha.in_proj_weight), b = values(mha.in_proj_bias),
                      ow = values(mha.out_proj->weight), ob = values(mha.out_proj->bias);
  std::vector<double> qv = values(q), kv = values(k), vv = values(v);
  std::vector<double> mask = blocked.defined() ? values(blocked) : std::vector<double>{};
  auto project = [&](const std::vector<double>& x, int64_t len, int part) {
    std::vector<double> out(n * len * e);
    for (int64_t i = 0; i < n * len; ++i)
      for (int64_t o = 0; o < e; ++o) {
        double acc = b[part * e + o];
        for (int64_t j = 0; j < e; ++j) acc += x[i * e + j] * w[(part * e + o) * e + j];
        out[i * e + o] = acc;
      }
    return out;
  };
  std::vector<double> qp = project(qv, l, 0), kp = project(kv, s, 1), vp = project(vv, s, 2);
  std::vector<double> att(n * l * e);
  if (weights) weights->assign(n * h * l * s, 0);
  for (int64_t bi = 0; bi < n; ++bi)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t i = 0; i < l; ++i) {
        std::vector<double> sc(s);
        double mx = -INFINITY;
        for (int64_t j = 0; j < s; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < d; ++c)
            dot += qp[(bi * l + i) * e + hi * d + c] * kp[(bi * s + j) * e + hi * d + c];
          sc[j] = dot / std::sqrt(double(d));
          if (!mask.empty() && mask[i * s + j] != 0) sc[j] = -INFINITY;
          mx = std::max(mx, sc[j]);
        }
        double z = 0;
        for (int64_t j = 0; j < s; ++j) z += sc[j] = std::exp(sc[j] - mx);
        if (weights)
          for (int64_t j = 0; j < s; ++j) (*weights)[((bi * h + hi) * l + i) * s + j] = sc[j] / z;
        for (int64_t c = 0; c < d; ++c) {
          double acc = 0;
          for (int64_t j = 0; j < s; ++j) acc += sc[j] / z * vp[(bi * s + j) * e + hi * d + c];
          att[(bi * l + i) * e + hi * d + c] = acc;
        }
      }
  std::vector<double> out(n * l * e);
  for (int64_t i = 0; i < n * l; ++i)
    for (int64_t o = 0; o < e; ++o) {
      double acc = ob[o];
      for (int64_t j = 0; j < e; ++j) acc += att[i * e + j] * ow[o * e + j];
      out[i * e + o] = acc;
    }
  return out;
}
}  // namespace

TEST(NnLayers, MultiheadAttentionMatchesLoops) {
  manual_seed(6);
  nn::MultiheadAttention mha(8, 2, {.batch_first = true, .dtype = kFloat64});
  EXPECT_EQ(mha.state_dict().keys(),
            (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight",
                                      "out_proj.bias"}));
  EXPECT_EQ(mha.in_proj_weight.sizes(), (Shape{24, 8}));
  // Give the biases values, so that a wrong slice of them shows.
  mha.load_state_dict({{"in_proj_weight", mha.in_proj_weight},
                       {"in_proj_bias", random({24}, kFloat64)},
                       {"out_proj.weight", mha.out_proj->weight},
                       {"out_proj.bias", random({8}, kFloat64)}});
  Tensor q = random({2, 3, 8}, kFloat64), k = random({2, 5, 8}, kFloat64),
         v = random({2, 5, 8}, kFloat64);
  expect_close(mha.forward(q, k, v), mha_reference(mha, q, k, v, {}), {2, 3, 8}, 1e-10, 1e-10);
  // Self-attention takes the fused projection path.
  expect_close(mha.forward(q), mha_reference(mha, q, q, q, {}), {2, 3, 8}, 1e-10, 1e-10);
  // A bool mask is true where attention is not allowed; causal is the upper triangle.
  Tensor causal = triu(ones({3, 3}, kBool), 1);
  auto causal_ref = mha_reference(mha, q, q, q, causal);
  expect_close(mha.forward(q, q, q, causal), causal_ref, {2, 3, 8}, 1e-10, 1e-10);
  expect_close(mha.forward(q, q, q, {}, {}, /*is_causal=*/true), causal_ref, {2, 3, 8}, 1e-10,
               1e-10);
  // The same as a float mask.
  Tensor additive = where(causal, -INFINITY, zeros({3, 3}, kFloat64));
  expect_close(mha.forward(q, q, q, additive), causal_ref, {2, 3, 8}, 1e-10, 1e-10);
  // A key padding mask hides keys per batch element.
  Tensor pad = tensor<int64_t>({0, 0, 0, 1, 1, 0, 0, 0, 0, 0}, Shape{2, 5}).to(kBool);
  Tensor y = mha.forward(q, k, v, {}, pad);
  auto ref0 = mha_reference(mha, q.narrow(0, 0, 1), k.narrow(0, 0, 1).narrow(1, 0, 3),
                            v.narrow(0, 0, 1).narrow(1, 0, 3), {});
  expect_close(y.narrow(0, 0, 1), ref0, {1, 3, 8}, 1e-10, 1e-10);
  expect_close(y.narrow(0, 1, 1),
               mha_reference(mha, q.narrow(0, 1, 1), k.narrow(0, 1, 1), v.narrow(0, 1, 1), {}),
               {1, 3, 8}, 1e-10, 1e-10);
}

TEST(NnLayers, MultiheadAttentionReturnsWeights) {
  manual_seed(8);
  nn::MultiheadAttention mha(8, 2, {.batch_first = true, .dtype = kFloat64});
  Tensor q = random({2, 3, 8}, kFloat64), k = random({2, 5, 8}, kFloat64),
         v = random({2, 5, 8}, kFloat64);
  std::vector<double> w;
  std::vector<double> out = mha_reference(mha, q, k, v, {}, &w);
  auto [y, per_head] = mha.forward_with_weights(q, k, v, {}, {}, /*average_attn_weights=*/false);
  expect_close(y, out, {2, 3, 8}, 1e-10, 1e-10);
  expect_close(per_head, w, {2, 2, 3, 5}, 1e-10, 1e-10);
  // Averaged over the heads: (N, L, S).
  std::vector<double> avg(2 * 3 * 5);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 15; ++i)
      avg[b * 15 + i] = (w[(b * 2) * 15 + i] + w[(b * 2 + 1) * 15 + i]) / 2;
  expect_close(mha.forward_with_weights(q, k, v).second, avg, {2, 3, 5}, 1e-10, 1e-10);
  // Masks as in forward: bool, float and causal agree; masked weights are exactly 0.
  Tensor causal = triu(ones({3, 3}, kBool), 1);
  std::vector<double> wc;
  std::vector<double> causal_out = mha_reference(mha, q, q, q, causal, &wc);
  for (const auto& [out_c, weights_c] :
       {mha.forward_with_weights(q, q, q, causal, {}, false),
        mha.forward_with_weights(q, q, q, where(causal, -INFINITY, zeros({3, 3}, kFloat64)), {},
                                 false),
        mha.forward_with_weights(q, q, q, {}, {}, false, /*is_causal=*/true)}) {
    expect_close(out_c, causal_out, {2, 3, 8}, 1e-10, 1e-10);
    expect_close(weights_c, wc, {2, 2, 3, 3}, 1e-10, 1e-10);
    EXPECT_EQ(weights_c.select(3, 2).select(2, 0).select(1, 0).select(0, 0).item<double>(), 0.0);
  }
  // Unbatched: (L, S) weights.
  auto [yu, wu] = mha.forward_with_weights(q.select(0, 1), k.select(0, 1), v.select(0, 1));
  EXPECT_EQ(wu.sizes(), (Shape{3, 5}));
  expect_close(wu, std::vector<double>(avg.begin() + 15, avg.end()), {3, 5}, 1e-10, 1e-10);
  expect_close(yu, std::vector<double>(out.begin() + 24, out.end()), {3, 8}, 1e-10, 1e-10);
}

TEST(NnLayers, MultiheadAttentionLayoutsAndErrors) {
  manual_seed(7);
  nn::MultiheadAttention seq_first(4, 2);
  Tensor x = random({3, 2, 4});  // (L, N, E)
  nn::MultiheadAttention batch_first(4, 2, {.batch_first = true});
  batch_first.load_state_dict(seq_first.state_dict());
  Tensor a = seq_first.forward(x);
  Tensor b = batch_first.forward(x.transpose(0, 1));
  EXPECT_EQ(a.sizes(), (Shape{3, 2, 4}));
  EXPECT_TRUE(allclose(a, b.transpose(0, 1), 1e-5, 1e-6));
  // Unbatched (L, E).
  EXPECT_TRUE(allclose(batch_first.forward(x.select(1, 0)), b[0], 1e-5, 1e-6));
  EXPECT_COIL_ERROR(nn::MultiheadAttention(6, 4), "must be divisible by num_heads");
  EXPECT_COIL_ERROR(batch_first.forward(random({2, 3, 5})), "embed_dim=4 features");
  EXPECT_COIL_ERROR(batch_first.forward(x, x, x, ones({3, 4}, kBool)),
                    "a 2-D attn_mask must be (L, S) = [2, 2]");
  EXPECT_COIL_ERROR(batch_first.forward(x, x, x, triu(ones({2, 2}, kBool), 1), {}, true),
                    "pass either attn_mask or is_causal");
  EXPECT_COIL_ERROR(batch_first.forward(x, x, x, {}, ones({2, 2}, kBool)),
                    "key_padding_mask must be (N, S) = [3, 2]");
}
