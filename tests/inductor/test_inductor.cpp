// The inductor backend end to end: the workloads of TARGETS.md compile to the expected number
// of kernels and match eager.
#include <cstdlib>

#include "testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

class Inductor : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("COIL_DISABLE");
    compiler_reset();
  }
  int64_t count(const char* name) { return counters()[name]; }
};

void expect_matches(const Tensor& got, const Tensor& want, double rtol = 1e-5, double atol = 1e-5) {
  ASSERT_EQ(got.sizes(), want.sizes());
  ASSERT_EQ(got.dtype(), want.dtype());
  expect_close(got, values(want), want.sizes(), rtol, atol);
}

}  // namespace

TEST_F(Inductor, SinCosIsOneKernel) {
  auto f = [](const Tensor& x) { return sin(x).pow(2) + cos(x).pow(2); };
  auto cf = compile(f);
  Tensor x = random({1000});
  expect_matches(cf(x), f(x));
  EXPECT_EQ(count("generated_kernels"), 1);
}

TEST_F(Inductor, SoftmaxIsOneKernel) {
  auto f = [](const Tensor& x) { return softmax(x, -1); };
  auto cf = compile(f);
  Tensor x = random({37, 61});
  expect_matches(cf(x), f(x));
  EXPECT_EQ(count("generated_kernels"), 1);
}

TEST_F(Inductor, LayerNormGeluIsOneKernel) {
  auto f = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    return gelu(layer_norm(x, {64}, w, b));
  };
  auto cf = compile(f);
  Tensor x = random({33, 64}), w = random({64}), b = random({64});
  expect_matches(cf(x, w, b), f(x, w, b));
  EXPECT_EQ(count("generated_kernels"), 1);
}
