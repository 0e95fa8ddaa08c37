// Freezing (options["freezing"]): batch norm in inference folds into the convolution before it
// when every tensor involved is captured; otherwise the graph keeps both, and results match
// eager either way.
#include <coil/coil.h>

#include "testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

struct ConvBn {
  Tensor w = random({8, 4, 3, 3}), b = random({8}), gamma = random({8}), beta = random({8}),
         mean = random({8}), var = random({8}).abs() + 0.5;
};

CompileOptions frozen() {
  CompileOptions o;
  o.options["freezing"] = true;
  return o;
}

const char* kFolded = "freezing round 1: fold_conv_batch_norm changed the graph";

}  // namespace

TEST(Freezing, BatchNormFoldsIntoTheConvolution) {
  ConvBn p;
  auto f = [&](const Tensor& x) {
    return relu(batch_norm(conv2d(x, p.w, p.b, {2, 2}, {1, 1}), p.gamma, p.beta, p.mean, p.var,
                           false, 0.1, 1e-3));
  };
  Tensor x = random({2, 4, 11, 11});
  Tensor got;
  std::string log = log_of("passes", [&] { got = compile(f, frozen())(x); });
  EXPECT_NE(log.find(kFolded), std::string::npos) << log;
  expect_close(got, values(f(x)), f(x).sizes(), 1e-4, 1e-5);  // folding rounds differently

  // Grouped, without the convolution's bias, batch norm without its affine parameters.
  Tensor wg = random({8, 2, 3, 3});
  auto g = [&](const Tensor& x) {
    return batch_norm(conv2d(x, wg, Tensor(), {1, 1}, {0, 0}, {1, 1}, 2), Tensor(), Tensor(),
                      p.mean, p.var, false);
  };
  log = log_of("passes", [&] { got = compile(g, frozen())(x); });
  EXPECT_NE(log.find(kFolded), std::string::npos) << log;
  expect_close(got, values(g(x)), g(x).sizes(), 1e-4, 1e-5);
}

// Nothing folds without freezing, in training mode, when a statistic is an input, or when the
// convolution's result is read elsewhere too.
TEST(Freezing, OnlyCapturedInferenceBatchNormsFold) {
  ConvBn p;
  Tensor x = random({2, 4, 9, 9});
  auto eval = [&](const Tensor& x) {
    return batch_norm(conv2d(x, p.w, p.b), p.gamma, p.beta, p.mean, p.var, false);
  };
  auto train = [&](const Tensor& x) {
    return batch_norm(conv2d(x, p.w, p.b), p.gamma, p.beta, p.mean.clone(), p.var.clone(), true);
  };
  auto input_mean = [&](const Tensor& x, const Tensor& mean) {
    return batch_norm(conv2d(x, p.w, p.b), p.gamma, p.beta, mean, p.var, false);
  };
  auto two_users = [&](const Tensor& x) {
    Tensor c = conv2d(x, p.w, p.b);
    return batch_norm(c, p.gamma, p.beta, p.mean, p.var, false) + c;
  };
  std::string log = log_of("passes", [&] {
    expect_close(compile(eval)(x), values(eval(x)), eval(x).sizes(), 1e-5, 1e-5);
    EXPECT_TRUE(allclose(compile(train, frozen())(x), train(x), 1e-4, 1e-5));
    expect_close(compile(input_mean, frozen())(x, p.mean), values(input_mean(x, p.mean)),
                 eval(x).sizes(), 1e-5, 1e-5);
    expect_close(compile(two_users, frozen())(x), values(two_users(x)), eval(x).sizes(), 1e-5,
                 1e-5);
  });
  EXPECT_EQ(log.find(kFolded), std::string::npos) << log;
  EXPECT_COIL_ERROR(compile(eval, {.options = {{"freezing", int64_t{1}}}}), "true or false");
}
