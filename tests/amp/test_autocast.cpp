// Autocast (coil/amp.h): each op of PyTorch's lists casts as PyTorch casts it, on the CPU and
// (where there is one) the GPU, eagerly and in compiled functions, whose graphs show the casts
// and whose guards tell a call with autocast from one without; nested scopes; the parameters'
// gradients in float32; dtypes autocast does not take are clear errors; a weight's cast made
// once per scope.
#include <coil/coil.h>
#include <coil/profiler.h>

#include "cuda_testing.h"
#include "graph/autocast.h"
#include "testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

template <typename F>
void expect_error_contains(F&& f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one saying: " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

// One op of each kind, given f32 (or, for the float32 list, 16-bit) inputs on `device`: its
// result's dtype under autocast is the case's.
struct ListCase {
  const char* what;
  std::function<Tensor(Device)> run;
  DType under_autocast;
};

Tensor r(const Shape& s, DType t, Device d) { return random(s, kFloat32, -1, 1).to(t).to(d); }

std::vector<ListCase> shared_cases(DType low) {
  const DType f = kFloat32, b = kBFloat16;
  return {
      {"mm",
       [=](Device d) {
         return mm(r({4, 8}, f, d), r({8, 3}, f, d));
       },
       low},
      {"bmm",
       [=](Device d) {
         return bmm(r({2, 4, 8}, f, d), r({2, 8, 3}, f, d));
       },
       low},
      {"matmul",
       [=](Device d) {
         return matmul(r({2, 4, 8}, f, d), r({8, 3}, f, d));
       },
       low},
      {"addmm",
       [=](Device d) {
         return addmm(r({3}, f, d), r({4, 8}, f, d), r({8, 3}, f, d));
       },
       low},
      {"linear",
       [=](Device d) {
         return linear(r({4, 8}, f, d), r({3, 8}, f, d), r({3}, f, d));
       },
       low},
      {"conv2d",
       [=](Device d) {
         return conv2d(r({1, 2, 6, 6}, f, d), r({4, 2, 3, 3}, f, d));
       },
       low},
      {"attention",
       [=](Device d) {
         return scaled_dot_product_attention(r({1, 2, 5, 8}, f, d), r({1, 2, 5, 8}, f, d),
                                             r({1, 2, 5, 8}, f, d));
       },
       low},
      {"mse_loss",
       [=](Device d) {
         return mse_loss(r({4, 3}, b, d), r({4, 3}, b, d));
       },
       f},
      {"cross_entropy",
       [=](Device d) {
         return cross_entropy(r({4, 5}, b, d), randint(0, 5, {4}).to(d));
       },
       f},
      {"nll_loss",
       [=](Device d) {
         return nll_loss(r({4, 5}, b, d), randint(0, 5, {4}).to(d));
       },
       f},
      {"prod",
       [=](Device d) {
         return r({4, 3}, b, d).prod();
       },
       f},
      // Not on a list: the inputs' own types.
      {"add", [=](Device d) { return r({4}, b, d) + r({4}, b, d); }, b},
      {"relu", [=](Device d) { return r({4}, f, d).relu(); }, f},
      // float64 is never cast.
      {"mm of float64",
       [=](Device d) {
         return mm(r({4, 8}, kFloat64, d), r({8, 3}, kFloat64, d));
       },
       kFloat64},
  };
}

void expect_lists(Device device, const std::vector<ListCase>& cases) {
  for (const ListCase& c : cases) {
    SCOPED_TRACE(c.what);
    autocast on(device.type);
    EXPECT_EQ(dtype_name(c.run(device).dtype()), std::string(dtype_name(c.under_autocast)));
  }
}

TEST(Autocast, CpuListsCastAsPyTorch) {
  std::vector<ListCase> cases = shared_cases(kBFloat16);
  const DType f = kFloat32, b = kBFloat16;
  cases.push_back({"cat promotes", [=](Device d) { return cat({r({2}, b, d), r({2}, f, d)}); }, f});
  cases.push_back({"stack promotes",
                   [=](Device d) {
                     return stack({r({2}, b, d), r({2}, f, d)});
                   },
                   f});
  // On the CPU, exp and softmax are on no list.
  cases.push_back({"exp", [=](Device d) { return r({4}, b, d).exp(); }, b});
  cases.push_back({"softmax", [=](Device d) { return softmax(r({4, 3}, b, d), -1); }, b});
  expect_lists(kCPU, cases);
}

TEST(Autocast, ListsCastAsPyTorchOnCuda) {
  COIL_REQUIRE_GPU();
  std::vector<ListCase> cases = shared_cases(kFloat16);  // the GPU's default
  const DType f = kFloat32, b = kBFloat16;
  for (const auto& [name, op] : std::vector<std::pair<const char*, Tensor (*)(const Tensor&)>>{
           {"exp", [](const Tensor& x) { return x.exp(); }},
           {"log", [](const Tensor& x) { return x.abs().log(); }},
           {"rsqrt", [](const Tensor& x) { return x.abs().rsqrt(); }},
           {"pow", [](const Tensor& x) { return x.pow(2); }},
           {"softmax", [](const Tensor& x) { return softmax(x, -1); }},
           {"log_softmax", [](const Tensor& x) { return log_softmax(x, -1); }},
           {"sum", [](const Tensor& x) { return x.sum(); }},
           {"cumsum", [](const Tensor& x) { return cumsum(x, 0); }},
           {"layer_norm", [](const Tensor& x) { return layer_norm(x, {3}); }},
       })
    cases.push_back({name, [=, op = op](Device d) { return op(r({4, 3}, b, d)); }, f});
  cases.push_back({"scatter_add promotes",
                   [=](Device d) {
                     return scatter_add(r({4}, b, d), 0, randint(0, 4, {3}).to(d), r({3}, f, d));
                   },
                   f});
  expect_lists(kCUDA, cases);
}

// The table for the GPU, readable without one: each op of PyTorch's CUDA lists that coil has.
TEST(Autocast, TheGpuTableIsPyTorchs) {
  for (OpId op : {OpId::mm, OpId::bmm, OpId::addmm, OpId::matmul, OpId::linear, OpId::conv2d,
                  OpId::scaled_dot_product_attention})
    EXPECT_EQ(autocast_policy(DeviceType::CUDA, op), CastPolicy::LowerPrecision) << op_name(op);
  for (OpId op : {OpId::exp, OpId::expm1, OpId::log, OpId::log2, OpId::log1p, OpId::reciprocal,
                  OpId::rsqrt, OpId::tan, OpId::pow, OpId::layer_norm, OpId::group_norm,
                  OpId::nll_loss, OpId::mse_loss, OpId::logsumexp})
    EXPECT_EQ(autocast_policy(DeviceType::CUDA, op), CastPolicy::Float32) << op_name(op);
  for (OpId op : {OpId::prod, OpId::softmax, OpId::log_softmax, OpId::cumsum, OpId::sum})
    EXPECT_EQ(autocast_policy(DeviceType::CUDA, op), CastPolicy::Float32Result) << op_name(op);
  for (OpId op : {OpId::atan2, OpId::scatter_add})
    EXPECT_EQ(autocast_policy(DeviceType::CUDA, op), CastPolicy::Promote) << op_name(op);
  for (OpId op : {OpId::add, OpId::relu, OpId::gelu, OpId::view, OpId::to_dtype, OpId::dropout})
    EXPECT_EQ(autocast_policy(DeviceType::CUDA, op), std::nullopt) << op_name(op);
}

TEST(Autocast, NestedScopesRestoreTheirState) {
  const Tensor a = random({4, 8}), b = random({8, 3});
  EXPECT_FALSE(is_autocast_enabled(DeviceType::CPU));
  {
    autocast on(DeviceType::CPU);
    EXPECT_EQ(mm(a, b).dtype(), kBFloat16);
    {
      autocast off(DeviceType::CPU, std::nullopt, false);
      EXPECT_EQ(mm(a, b).dtype(), kFloat32);
      {
        autocast half(DeviceType::CPU, kFloat16);
        EXPECT_EQ(mm(a, b).dtype(), kFloat16);
      }
      EXPECT_FALSE(is_autocast_enabled(DeviceType::CPU));
    }
    EXPECT_EQ(mm(a, b).dtype(), kBFloat16);
    EXPECT_EQ(autocast_dtype(DeviceType::CPU), kBFloat16);
  }
  EXPECT_FALSE(is_autocast_enabled(DeviceType::CPU));
  EXPECT_EQ(mm(a, b).dtype(), kFloat32);
}

TEST(Autocast, DtypesItDoesNotTakeAreClearErrors) {
  expect_error_contains([] { autocast on(DeviceType::CPU, kFloat64); },
                        "autocast(cpu): dtype float64 is not a lower precision");
  expect_error_contains([] { autocast on(DeviceType::CPU, kInt32); }, "int32");
  EXPECT_FALSE(is_autocast_enabled(DeviceType::CPU));  // a failed guard changed nothing
  if (!cuda::is_built())
    expect_error_contains([] { autocast on(DeviceType::CUDA); }, "built without CUDA");
}

// A compiled function under autocast: its graph holds the casts, its result is eager's under
// autocast, and a call without autocast compiles another graph (the guard names the change).
TEST(Autocast, CompiledFunctionsCastAndGuardOnIt) {
  compiler_reset();
  manual_seed(3);
  const Tensor x = random({16, 32}), w = random({24, 32}), t = random({16, 24});
  auto f = [](const Tensor& x, const Tensor& w, const Tensor& t) {
    return mse_loss(linear(x, w).relu(), t);
  };
  auto cf = compile(f, {.name = "f", .arg_names = {"x", "w", "t"}});
  Tensor got, want;
  const std::string log = log_of("graph_code,recompiles", [&] {
    {
      autocast on(DeviceType::CPU);
      got = cf(x, w, t);
      want = f(x, w, t);
    }
    EXPECT_EQ(cf(x, w, t).dtype(), kFloat32);
  });
  EXPECT_EQ(got.dtype(), kFloat32);  // mse_loss is on the float32 list
  expect_close(got, values(want), {}, 2e-2, 1e-3);
  EXPECT_NE(log.find("to_dtype"), std::string::npos) << log;
  EXPECT_NE(log.find("bf16"), std::string::npos) << log;
  EXPECT_NE(log.find("autocast changed cpu bfloat16 -> off"), std::string::npos) << log;
}

// Mixed-precision training: float32 parameters, the products in bfloat16, the gradients back in
// float32; compiled as eager, and both near float32's.
TEST(Autocast, ParametersGetFloat32GradientsEagerAndCompiled) {
  manual_seed(4);
  const Tensor x = random({32, 64}), t = random({32, 16});
  auto loss_of = [](const Tensor& x, const Tensor& w1, const Tensor& w2, const Tensor& t) {
    return mse_loss(linear(gelu(linear(x, w1)), w2), t);
  };
  auto step = [&](bool compiled, bool amp) {
    manual_seed(5);
    Tensor w1 = random({48, 64}, kFloat32, -0.2, 0.2).requires_grad_();
    Tensor w2 = random({16, 48}, kFloat32, -0.2, 0.2).requires_grad_();
    Tensor loss;
    {
      autocast on(DeviceType::CPU, std::nullopt, amp);
      loss = compiled ? compile(loss_of)(x, w1, w2, t) : loss_of(x, w1, w2, t);
    }
    loss.backward();
    return std::vector<Tensor>{w1.grad(), w2.grad()};
  };
  const std::vector<Tensor> f32 = step(false, false), eager = step(false, true),
                            compiled = step(true, true);
  for (size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(eager[i].dtype(), kFloat32);
    EXPECT_EQ(compiled[i].dtype(), kFloat32);
    expect_close(compiled[i], values(eager[i]), eager[i].sizes(), 2e-2, 2e-3);
    expect_close(eager[i], values(f32[i]), f32[i].sizes(), 5e-2, 5e-3);
    // ... and not float32's own: the products ran in bfloat16.
    EXPECT_GT((eager[i] - f32[i]).abs().amax().item<double>(), 1e-5);
  }
}

// The casts `body` makes (to_dtype calls, as the profiler counts them).
template <typename F>
int64_t casts_in(F&& body) {
  Profiler p;
  body();
  int64_t n = 0;
  for (const Profiler::Row& r : p.rows())
    if (r.name == "to_dtype") n += r.calls;
  return n;
}

// A weight read by two products in one scope is cast once (PyTorch's cache_enabled), its
// gradient the sum of both uses as without the cache (to bfloat16's rounding); a new scope, a write
// into the weight or cache_enabled = false casts again; an input that is not a leaf needing grad is
// never cached.
TEST(Autocast, AWeightIsCastOncePerScope) {
  manual_seed(6);
  const Tensor x = random({8, 16});
  Tensor w = random({16, 16}).requires_grad_();
  auto twice = [&] { return matmul(matmul(x, w), w).sum(); };
  auto grad_of = [&](bool cache) {
    w.set_grad(Tensor());
    Tensor loss;
    {
      autocast on(DeviceType::CPU, kBFloat16, true, cache);
      EXPECT_EQ(casts_in([&] { loss = twice(); }), cache ? 2 : 3);  // x once, w once or twice
    }
    loss.backward();
    return w.grad();
  };
  // (The cached cast's gradient is the two uses' sum in bfloat16, cast once; without the cache
  // each use's is cast to float32 and summed there: they differ by bfloat16's rounding.)
  const Tensor cached = grad_of(true), uncached = grad_of(false);
  EXPECT_LE((cached - uncached).abs().amax().item<double>(),
            1e-2 * uncached.abs().amax().item<double>());
  {
    autocast on(DeviceType::CPU, kBFloat16);
    EXPECT_EQ(casts_in(twice), 2);
    EXPECT_EQ(casts_in(twice), 1);  // x again (it needs no grad), the weight's cast reused
    {
      NoGradGuard no_grad;
      w.mul_(0.5);  // an optimizer's step inside the scope
    }
    EXPECT_EQ(casts_in(twice), 2);  // the weight cast again: its old cast is stale
    Tensor y;
    casts_in([&] { y = matmul(x, w); });
    EXPECT_TRUE(allclose(y.to(kFloat32), matmul(x.to(kBFloat16), w.to(kBFloat16)).to(kFloat32),
                         1e-2, 1e-2));
  }
  autocast again(DeviceType::CPU, kBFloat16);
  EXPECT_EQ(casts_in(twice), 2);  // a new scope casts again
}

}  // namespace
