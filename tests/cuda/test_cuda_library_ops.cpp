// The GPU's library ops and kernels of coil's own against the CPU: cuDNN's convolutions, the
// random draws, the fused attention kernel, pooling. Each test skips, saying why, where coil was
// built without CUDA or there is no GPU.
#include <coil/coil.h>
#include <coil/cuda.h>

#include "cuda_testing.h"
#include "graph/registry.h"
#include "testing.h"

using namespace coil;
using namespace coil::testing;

// Convolutions on the GPU are cuDNN's: forward with a bias and both gradients, eager and in a
// compiled training step, for strides, padding, dilation, groups and every floating dtype,
// against the CPU; none runs on the CPU instead.
TEST(Cuda, ConvolutionsRunOnCudnn) {
  COIL_REQUIRE_GPU();
  struct Case {
    Shape x, w, stride, padding, dilation;
    int64_t groups;
  };
  const std::vector<Case> cases = {
      {{2, 3, 9, 9}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
      {{2, 4, 11, 8}, {6, 2, 3, 2}, {2, 1}, {1, 0}, {2, 1}, 2},
      {{3, 4, 7, 7}, {4, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 4},  // depthwise
      {{4, 16, 14, 14}, {8, 16, 1, 1}, {2, 2}, {0, 0}, {1, 1}, 1},
      {{3, 5, 6}, {2, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1},  // unbatched
  };
  auto grads = [](const Case& c, const std::vector<Tensor>& in, Device device) {
    Tensor x = in[0].detach().to(device).requires_grad_(),
           w = in[1].detach().to(device).requires_grad_(),
           b = in[2].detach().to(device).requires_grad_();
    Tensor y = conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
    (y * in[3].to(device)).sum().backward();
    return std::vector<Tensor>{y, x.grad(), w.grad(), b.grad()};
  };
  const std::string log = log_of("device_eager", [&] {
    for (const Case& c : cases)
      for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
        SCOPED_TRACE(shape_str(c.x) + " * " + shape_str(c.w) + " " + dtype_name(dt));
        std::vector<Tensor> in = {random(c.x, dt), random(c.w, dt), random({c.w[0]}, dt)};
        in.push_back(random(
            conv2d(in[0], in[1], in[2], c.stride, c.padding, c.dilation, c.groups).sizes(), dt));
        std::vector<Tensor> want = grads(c, in, kCPU), got = grads(c, in, kCUDA);
        // Sums of up to a few hundred products of values up to 2 in size, in another order.
        const double atol = dt == kFloat64 ? 1e-10 : dt == kFloat32 ? 1e-3 : 0.5;
        for (size_t i = 0; i < want.size(); ++i) {
          SCOPED_TRACE("result " + std::to_string(i));
          ASSERT_EQ(got[i].device(), kCUDA);
          expect_close(got[i].cpu(), values(want[i]), want[i].sizes(), rtol_for(dt) * 4, atol);
        }
      }
  });
  EXPECT_EQ(log.find("runs on the CPU"), std::string::npos) << log;

  // Channels-last input and weight: cuDNN runs NHWC (grouped convolutions NCHW, copied into the
  // layout), and the results have the CPU's values and layouts (channels-last output and
  // gradients, docs/memory_format.md).
  for (size_t k : {0, 1, 3})
    for (DType dt : {kFloat32, kBFloat16}) {
      const Case& c = cases[k];
      SCOPED_TRACE("channels-last, case " + std::to_string(k) + " " + dtype_name(dt));
      std::vector<Tensor> in = {random(c.x, dt).contiguous(MemoryFormat::ChannelsLast),
                                random(c.w, dt).contiguous(MemoryFormat::ChannelsLast),
                                random({c.w[0]}, dt)};
      in.push_back(random(
          conv2d(in[0], in[1], in[2], c.stride, c.padding, c.dilation, c.groups).sizes(), dt));
      std::vector<Tensor> want = grads(c, in, kCPU), got = grads(c, in, kCUDA);
      for (size_t i = 0; i < want.size(); ++i) {
        SCOPED_TRACE("result " + std::to_string(i));
        EXPECT_EQ(got[i].strides(), want[i].strides());
        expect_close(got[i].cpu(), values(want[i]), want[i].sizes(),
                     dt == kFloat32 ? 4e-5 : rtol_for(dt) * 4, dt == kFloat32 ? 1e-3 : 0.5);
      }
    }

  // A compiled training step through two convolutions, against the CPU's eager gradients.
  auto loss_of = [](const Tensor& x, const Tensor& w1, const Tensor& w2) {
    Tensor h = relu(conv2d(x, w1, {}, {1, 1}, {1, 1}));
    Tensor y = conv2d(h, w2, {}, {2, 2});
    return (y * y).mean();
  };
  std::vector<Tensor> host = {random({4, 3, 12, 12}), random({8, 3, 3, 3}), random({4, 8, 3, 3})};
  auto step = [&](auto&& f, Device device) {
    std::vector<Tensor> in;
    for (size_t i = 0; i < host.size(); ++i) {
      Tensor t = host[i].detach().to(device);
      if (i > 0) t.requires_grad_();
      in.push_back(t);
    }
    Tensor loss = f(in[0], in[1], in[2]);
    loss.backward();
    return std::vector<Tensor>{loss, in[1].grad(), in[2].grad()};
  };
  std::vector<Tensor> want = step(loss_of, kCPU), got = step(compile(loss_of), kCUDA);
  for (size_t i = 0; i < want.size(); ++i)
    expect_same(got[i], want[i], "compiled, " + std::to_string(i), 1e-4);
}

// The random factories draw on the GPU with the CPU's counter-based generator: the same seed
// gives the CPU's numbers (uniform and integer bit for bit, normal to an ulp of the device's log
// and cos), eagerly and inside compiled graphs, and dropout (attention's too) keeps the CPU's
// elements.
TEST(Cuda, RandomNumbersAreTheCpus) {
  COIL_REQUIRE_GPU();
  auto draws = [](Device device) {
    manual_seed(21);
    std::vector<Tensor> out;
    for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
      out.push_back(rand({300, 37}, dt, device));
      out.push_back(randn({513}, dt, device));
    }
    out.push_back(randint(-5, 9, {77}, kInt64, device));
    out.push_back(randint(0, 3, {1000}, kInt32, device));
    out.push_back(dropout(ones({40, 50}, kFloat32, device), 0.3, true));
    out.push_back(compile([](const Tensor& x) {
      return x * rand({64, 33}, kFloat32, x.device());
    })(full({64, 33}, 2.0, kFloat32, device)));
    return out;
  };
  std::vector<Tensor> want = draws(kCPU), got = draws(kCUDA);
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE("draw " + std::to_string(i));
    ASSERT_EQ(got[i].device(), kCUDA);
    const bool normal = i < 6 && i % 2 == 1;
    if (normal)
      expect_same(got[i], want[i], "randn", want[i].dtype() == kFloat64 ? 1e-14 : 0);
    else
      EXPECT_TRUE(equal(got[i].cpu(), want[i]));
  }
  // Attention's dropout draws them too (decomposed into rand and kernels on the GPU, not run on
  // CPU copies): the same weights are dropped.
  Tensor q = random({2, 3, 9, 16}), k = random({2, 3, 11, 16}), v = random({2, 3, 11, 8});
  for (bool causal : {false, true}) {
    manual_seed(5);
    Tensor cpu = scaled_dot_product_attention(q, k, v, {}, 0.3, causal);
    manual_seed(5);
    Tensor gpu = scaled_dot_product_attention(q.cuda(), k.cuda(), v.cuda(), {}, 0.3, causal);
    expect_same(gpu, cpu, causal ? "causal attention, dropout" : "attention, dropout", 1e-4);
  }
}

// Attention without a mask (or with a causal one) runs in coil's fused kernel on the GPU, eager
// and compiled (the matmul-softmax-matmul idiom too), for every floating dtype, head sizes that
// need padding, query blocks past the first, broadcast and strided operands and no keys at
// all, against the CPU; its gradients follow.
TEST(Cuda, AttentionRunsInOneKernel) {
  COIL_REQUIRE_GPU();
  struct Case {
    Shape q, k, v;
    bool causal;
    std::optional<double> scale;
  };
  const std::vector<Case> cases = {
      {{2, 3, 100, 64}, {2, 3, 77, 64}, {2, 3, 77, 64}, false, {}},
      {{2, 3, 300, 64}, {2, 3, 300, 64}, {2, 3, 300, 64}, true, {}},
      {{2, 200, 80}, {2, 150, 80}, {2, 150, 40}, true, 0.3},  // L > S, causal
      {{4, 9, 5}, {1, 13, 5}, {4, 13, 7}, false, {}},         // broadcast batch
      {{33, 128}, {40, 128}, {40, 128}, false, {}},           // no batch, the largest head
      {{2, 6, 16}, {2, 0, 16}, {2, 0, 16}, false, {}},        // no keys: zeros
  };
  const std::string log = log_of("device_eager", [&] {
    for (const Case& c : cases)
      for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
        SCOPED_TRACE(shape_str(c.q) + " x " + shape_str(c.k) + (c.causal ? " causal " : " ") +
                     dtype_name(dt));
        Tensor q = random(c.q, dt), k = random(c.k, dt), v = random(c.v, dt);
        Tensor want = scaled_dot_product_attention(q, k, v, {}, 0.0, c.causal, c.scale);
        Tensor got =
            scaled_dot_product_attention(q.cuda(), k.cuda(), v.cuda(), {}, 0.0, c.causal, c.scale);
        const double tol = dt == kFloat64 ? 1e-12 : dt == kFloat32 ? 1e-5 : 2e-2;
        ASSERT_EQ(got.sizes(), want.sizes());
        expect_close(got.cpu(), values(want), want.sizes(), tol, tol);
      }
  });
  EXPECT_EQ(log.find("runs on the CPU"), std::string::npos) << log;

  // Heads taken from a [batch, seq, heads, features] layout: strided operands.
  Tensor x = random({2, 70, 4, 32});
  Tensor qs = x.transpose(1, 2), want = scaled_dot_product_attention(qs, qs, qs, {}, 0.0, true);
  Tensor xc = x.cuda().transpose(1, 2);
  expect_same(scaled_dot_product_attention(xc, xc, xc, {}, 0.0, true), want, "strided", 1e-5);
  // Rows that do not start 16-byte aligned: keys and values are read a float at a time.
  Tensor y = random({2, 3, 50, 65}), ys = y.narrow(-1, 1, 64);
  Tensor yc = y.cuda().narrow(-1, 1, 64);
  expect_same(scaled_dot_product_attention(yc, yc, yc, {}, 0.0, false),
              scaled_dot_product_attention(ys, ys, ys, {}, 0.0, false), "unaligned", 1e-5);

  // Compiled: the op and the idiom the attention pass finds become the fused kernel's call.
  auto idiom = [](const Tensor& q, const Tensor& k, const Tensor& v) {
    return matmul(softmax(matmul(q, k.transpose(-2, -1)) * 0.125, -1), v);
  };
  std::vector<Tensor> in = {random({2, 4, 130, 64}), random({2, 4, 90, 64}),
                            random({2, 4, 90, 64})};
  Tensor expected = idiom(in[0], in[1], in[2]);
  const std::string code = log_of("output_code", [&] {
    expect_same(compile(idiom)(in[0].cuda(), in[1].cuda(), in[2].cuda()), expected, "idiom", 1e-5);
  });
  EXPECT_NE(code.find("scaled_dot_product_attention"), std::string::npos) << code;
  // Compiled dynamic, every size a symbol: the head size too is guarded to fit the kernel, not
  // decomposed; other sizes run the same graph.
  auto dynamic = compile(idiom, {.dynamic = true});
  int64_t captures = 0;  // (log_of resets the counters before and after)
  const std::string dynamic_code = log_of("output_code", [&] {
    for (int64_t s : {90, 33}) {
      std::vector<Tensor> d = {random({2, 4, s + 7, 64}), random({2, 4, s, 64}),
                               random({2, 4, s, 64})};
      expect_same(dynamic(d[0].cuda(), d[1].cuda(), d[2].cuda()), idiom(d[0], d[1], d[2]),
                  "dynamic idiom", 1e-5);
    }
    captures = counters()["captures"];
  });
  EXPECT_NE(dynamic_code.find("scaled_dot_product_attention"), std::string::npos) << dynamic_code;
  EXPECT_EQ(captures, 1);

  // Gradients through the fused forward, against the CPU's.
  auto grads = [&](Device device) {
    std::vector<Tensor> leaves;
    for (const Tensor& t : in) leaves.push_back(t.detach().to(device).requires_grad_());
    Tensor y = scaled_dot_product_attention(leaves[0], leaves[1], leaves[2], {}, 0.0, true);
    (y * y).sum().backward();
    return std::vector<Tensor>{leaves[0].grad(), leaves[1].grad(), leaves[2].grad()};
  };
  std::vector<Tensor> g_cpu = grads(kCPU), g_gpu = grads(kCUDA);
  for (size_t i = 0; i < 3; ++i) expect_same(g_gpu[i], g_cpu[i], "grad " + std::to_string(i), 1e-4);
}

// Pooling on the GPU: max pools by coil's kernels for every window (dilation and ceil_mode
// too), average pools by cuDNN where it has the pool (no ceil_mode; adaptive pools with equal
// windows). Forward and gradient against the CPU, in every floating dtype; a max pool's winner
// is the CPU's (first maximum, first NaN), so its gradient matches even among the ties of 16-bit
// inputs. Average pools with ceil_mode run on the CPU, and say so in the device_eager log.
TEST(Cuda, PoolingRunsOnTheGpu) {
  COIL_REQUIRE_GPU();
  using Pool = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<std::string, Pool>> on_gpu = {
      {"max 2x2",
       [](const Tensor& x) {
         return max_pool2d(x, {2, 2});
       }},
      {"max 3x3 s2 p1",
       [](const Tensor& x) {
         return max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
       }},
      {"max 3x2 s1 p1 dilation 2x3",
       [](const Tensor& x) {
         return max_pool2d(x, {3, 2}, {1, 1}, {1, 1}, {2, 3});
       }},
      {"max 3x3 s2 ceil_mode",
       [](const Tensor& x) {
         return max_pool2d(x, {3, 3}, {2, 2}, {0, 0}, {1, 1}, true);
       }},
      {"avg 3x2 s1 p1",
       [](const Tensor& x) {
         return avg_pool2d(x, {3, 2}, {1, 1}, {1, 1});
       }},
      {"avg, padding not counted",
       [](const Tensor& x) {
         return avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}, false, false);
       }},
      {"adaptive 1x1",
       [](const Tensor& x) {
         return adaptive_avg_pool2d(x, {1, 1});
       }},
      {"adaptive 3x2",
       [](const Tensor& x) {
         return adaptive_avg_pool2d(x, {3, 2});
       }},
      // What cuDNN has no form of: coil's own kernels.
      {"avg 2x2 s2 ceil_mode",
       [](const Tensor& x) {
         return avg_pool2d(x, {2, 2}, {2, 2}, {0, 0}, true);
       }},
      {"avg 3x3 s2 p1 ceil_mode, padding not counted",
       [](const Tensor& x) {
         return avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}, true, false);
       }},
      {"adaptive 5x3 (windows of two sizes)",
       [](const Tensor& x) {
         return adaptive_avg_pool2d(x, {5, 3});
       }},
      {"adaptive 7x13 (more cells than rows)",
       [](const Tensor& x) {
         return adaptive_avg_pool2d(x, {7, 13});
       }},
  };
  auto run = [](const Pool& pool, const Tensor& input, const Tensor& g, Device device) {
    Tensor x = input.detach().to(device).requires_grad_();
    Tensor y = pool(x);
    (y * g.to(device)).sum().backward();
    return std::vector<Tensor>{y, x.grad()};
  };
  const std::string log = log_of("device_eager", [&] {
    for (const auto& [name, pool] : on_gpu)
      for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
        SCOPED_TRACE(name + " " + dtype_name(dt));
        for (const Shape& s : {Shape{2, 3, 12, 10}, Shape{5, 9, 8}}) {
          Tensor x = random(s, dt), g = random(pool(x).sizes(), dt);
          std::vector<Tensor> want = run(pool, x, g, kCPU), got = run(pool, x, g, kCUDA);
          for (size_t i = 0; i < 2; ++i)
            expect_close(got[i].cpu(), values(want[i]), want[i].sizes(), rtol_for(dt) * 4,
                         dt == kFloat64 ? 1e-12 : rtol_for(dt) * 4);
        }
      }
  });
  EXPECT_EQ(log.find("runs on the CPU"), std::string::npos) << log;
  // Max pools of integers, a NaN winning its windows, and the second derivative's op.
  Tensor ints = randint(-4, 4, {2, 3, 9, 7});
  expect_same(max_pool2d(ints.cuda(), {2, 3}, {1, 2}, {1, 1}, {2, 1}, true),
              max_pool2d(ints, {2, 3}, {1, 2}, {1, 1}, {2, 1}, true), "int64");
  Tensor x = random({2, 3, 11, 11});
  x.data_ptr<float>()[x.stride(1) + 4 * 11 + 4] = std::nanf("");
  expect_same(max_pool2d(x.cuda(), {3, 3}, {2, 2}, {1, 1}), max_pool2d(x, {3, 3}, {2, 2}, {1, 1}),
              "NaN");
  Tensor dx = random({2, 3, 11, 11});
  auto second = [&](Device d) {
    return call_op1(OpId::max_pool2d_double_backward,
                    {dx.to(d), x.to(d), Shape{3, 3}, Shape{2, 2}, Shape{1, 1}, Shape{2, 2}, true});
  };
  expect_same(second(kCUDA), second(kCPU), "max_pool2d_double_backward, dilated, ceil_mode");
  // Average pooling of integers (truncating, as the CPU) with ceil_mode, and compiled.
  expect_same(avg_pool2d(ints.cuda(), {2, 2}, {2, 2}, {0, 0}, true),
              avg_pool2d(ints, {2, 2}, {2, 2}, {0, 0}, true), "int64 avg_pool2d, ceil_mode");
  auto pools = [](const Tensor& t) {
    return avg_pool2d(t, {3, 3}, {2, 2}, {1, 1}, true, false) + adaptive_avg_pool2d(t, {6, 6});
  };
  expect_same(compile(pools)(x.cuda()), pools(x), "compiled");
  // A channels-last input: the CPU's values and layouts (channels-last results and gradients,
  // written as planes and copied into the layout, docs/memory_format.md).
  Tensor nhwc = random({2, 8, 11, 9}).contiguous(MemoryFormat::ChannelsLast);
  for (const auto& [name, pool] : on_gpu) {
    SCOPED_TRACE(name + ", channels-last");
    Tensor g = random(pool(nhwc).sizes());
    std::vector<Tensor> want = run(pool, nhwc, g, kCPU), got = run(pool, nhwc, g, kCUDA);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(got[i].strides(), want[i].strides()) << (i ? "gradient" : "pool");
      expect_same(got[i], want[i], i ? "gradient" : "pool", 1e-4, 1e-5);
    }
  }
}
