// CompileOptions::suppress_errors and COIL_SUPPRESS_ERRORS=1 (as torch._dynamo.config.
// suppress_errors): a compile that fails runs the graph eagerly with one warning naming why;
// without it the failure is a clear coil::Error. The failures tried: no C++ compiler, and a
// compiler that fails on everything.
#include <coil/coil.h>

#include "jit_testing.h"
#include "testing.h"

namespace coil::testing {
namespace {

Tensor f(const Tensor& x) { return (x.sin() * 2.0 + 1.0).sum({1}); }

void expect_same(const Tensor& got, const Tensor& want) {
  EXPECT_TRUE(allclose(got, want, 1e-5, 1e-6));
}

class SuppressErrorsTest : public JitTest {
 protected:
  void SetUp() override {
    JitTest::SetUp();
    unsetenv("COIL_SUPPRESS_ERRORS");
    compiler_reset();
  }
  void TearDown() override {
    unsetenv("COIL_SUPPRESS_ERRORS");
    compiler_reset();
    JitTest::TearDown();
  }
};

TEST_F(SuppressErrorsTest, AMissingCompilerRunsEagerlyWithAWarning) {
  setenv("COIL_CXX", "/nonexistent/c++", 1);
  Tensor x = random({4, 8});
  EXPECT_COIL_ERROR(compile(f)(x), "COIL_CXX");  // the default: a clear error

  for (bool by_env : {false, true}) {
    SCOPED_TRACE(by_env ? "COIL_SUPPRESS_ERRORS=1" : "CompileOptions::suppress_errors");
    compiler_reset();
    CompileOptions options;
    if (by_env)
      setenv("COIL_SUPPRESS_ERRORS", "1", 1);
    else
      options.suppress_errors = true;
    auto cf = compile(f, options);
    ::testing::internal::CaptureStderr();
    Tensor got = cf(x);
    std::string warning = ::testing::internal::GetCapturedStderr();
    expect_same(got, f(x));
    EXPECT_NE(warning.find("coil: warning: compiling 'fn' failed; it runs eagerly instead "
                           "(suppress_errors):"),
              std::string::npos)
        << warning;
    EXPECT_NE(warning.find("/nonexistent/c++"), std::string::npos) << warning;
    EXPECT_EQ(counters()["suppressed_errors"], 1);
    // Later calls run the eager graph without compiling or warning again.
    ::testing::internal::CaptureStderr();
    expect_same(cf(x * 2.0), f(x * 2.0));
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
    EXPECT_EQ(counters()["suppressed_errors"], 1);
  }
}

TEST_F(SuppressErrorsTest, AFailingCompilerRunsEagerlyInTrainingToo) {
  setenv("COIL_CXX", "/bin/false", 1);
  CompileOptions options;
  options.suppress_errors = true;
  Tensor w = random({8, 3}).requires_grad_(true);
  auto step = [&w](const Tensor& x) { return matmul(x, w).tanh().sum(); };
  Tensor x = random({5, 8});
  ::testing::internal::CaptureStderr();
  Tensor loss = compile(step, options)(x);
  std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warning.find("runs eagerly instead"), std::string::npos) << warning;
  loss.backward();
  Tensor grad = w.grad().clone();
  w.set_grad(Tensor());
  step(x).backward();
  expect_same(grad, w.grad());
}

}  // namespace
}  // namespace coil::testing
