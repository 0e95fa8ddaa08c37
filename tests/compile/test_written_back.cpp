// A compiled function's in-place updates of its arguments (an optimizer's parameters and
// moments) are written into the arguments' memory by the kernel that computes them, where that
// kernel reads the argument only at the element it writes and nothing reads the old value
// after it; otherwise into a buffer of their own, copied back after the call. Either way the
// arguments end as eager leaves them, on the CPU and on a GPU.
#include <coil/coil.h>
#include <coil/cuda.h>

#include "testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

std::vector<Device> devices() {
  std::vector<Device> out = {kCPU};
  if (cuda::is_available()) out.push_back(kCUDA);
  return out;
}

// `f` compiled and eager on copies of `args`: every argument and the result alike; returns the
// compiled call's wrapper code (the output_code log).
template <typename F>
std::string expect_updates_like_eager(F f, const std::vector<Tensor>& args) {
  std::vector<Tensor> eager, compiled;
  for (const Tensor& a : args) eager.push_back(a.clone()), compiled.push_back(a.clone());
  const Tensor want = f(eager);
  Tensor got;
  const std::string code = log_of("output_code", [&] { got = compile(f)(compiled); });
  // The result may be a float32 sum whose terms cancel: its error is relative to the terms,
  // not to the sum, hence the absolute tolerance.
  expect_close(got.cpu(), values(want.cpu()), want.sizes(), 1e-5, 1e-5);
  for (size_t i = 0; i < args.size(); ++i) {
    SCOPED_TRACE("argument " + std::to_string(i));
    expect_close(compiled[i].cpu(), values(eager[i].cpu()), eager[i].sizes(), 1e-5, 1e-6);
  }
  return code;
}

}  // namespace

TEST(WrittenBack, UpdatesAreWrittenIntoTheArguments) {
  for (Device d : devices()) {
    SCOPED_TRACE(d.str());
    const std::string code = expect_updates_like_eager(
        [](const std::vector<Tensor>& a) {
          a[0].mul_(0.9).add_(a[1]);
          a[2].mul_(a[1]);
          return a[1] + 1;
        },
        {random({64, 48}).to(d), random({64, 48}).to(d), random({64, 48}).to(d)});
    EXPECT_NE(code.find("= in_place(in0)"), std::string::npos) << code;
    EXPECT_NE(code.find("= in_place(in2)"), std::string::npos) << code;
  }
}

// The old value read after the update (a transposed copy, a sum over columns): the update goes
// to a buffer of its own wherever a kernel after the one computing it still reads the argument.
TEST(WrittenBack, OldValuesReadAfterTheUpdateStayIntact) {
  for (Device d : devices()) {
    SCOPED_TRACE(d.str());
    expect_updates_like_eager(
        [](const std::vector<Tensor>& a) {
          Tensor before = a[0].t().contiguous() * 2;
          a[0].add_(1);
          return before;
        },
        {random({48, 48}).to(d)});
    expect_updates_like_eager(
        [](const std::vector<Tensor>& a) {
          Tensor before = a[0].sum({0});
          a[0].mul_(3);
          return before + a[0].sum({1});
        },
        {random({40, 40}).to(d)});
  }
}

// The same tensor passed twice, the update reading the other argument at other elements (a
// flip): written into the argument's memory it would read elements already updated, so the
// call writes it into a buffer of its own.
TEST(WrittenBack, ATensorPassedTwiceIsUpdatedOnce) {
  for (Device d : devices()) {
    SCOPED_TRACE(d.str());
    auto f = [](const std::vector<Tensor>& a) {
      a[0].add_(flip(a[1], {0}));
      return a[1].sum();
    };
    compiler_reset();
    auto cf = compile(f);
    Tensor x = random({32, 16}).to(d), twin = random({32, 16}).to(d);
    const std::string code = log_of("output_code", [&] {
      cf(std::vector<Tensor>{twin.clone(), twin.clone()});
    });
    EXPECT_NE(code.find("= in_place(in0)"), std::string::npos) << code;
    const Tensor want = x.cpu() + flip(x.cpu(), {0});
    cf(std::vector<Tensor>{x, x});
    expect_close(x.cpu(), values(want), want.sizes(), 1e-6, 1e-7);
  }
}
