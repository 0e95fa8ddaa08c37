// An index compared with a value the same for every lane (a one-hot: arange(n) == target, the
// cross-entropy's gradient) keeps a CPU kernel vectorised: the lanes compare as their offsets,
// a mask. Every comparison, with targets before, inside and past each vector of lanes, against
// eager.
#include <coil/coil.h>

#include "testing.h"

using namespace coil;
using namespace coil::testing;

TEST(LaneComparisons, OneHotsStayVectorisedAndMatchEager) {
  // Targets below 0, at each end, inside, at and past the last column (37: a remainder loop too).
  Tensor targets = tensor(std::vector<int64_t>{-5, 0, 1, 15, 16, 17, 36, 37, 100}).reshape({9, 1});
  Tensor x = random({9, 37});
  auto f = compile([](const Tensor& x, const Tensor& t) {
    Tensor cols = arange(0, 37, 1, kInt64);
    return std::make_tuple(
        where(cols == t, x, 0.0), where(cols != t, x, 0.0), where(cols < t, x, 0.0),
        where(cols <= t, x, 0.0), where(t > cols, x, 0.0), where(cols >= t, x, 0.0),
        (cols + 3 == t).to(kFloat32) * x, where(cols<t, cols == t, cols> t - 2).to(kFloat32));
  });
  std::string code = log_of("output_code", [&] {
    auto got = f(x, targets);
    Tensor cols = arange(0, 37, 1, kInt64);
    expect_close(std::get<0>(got), values(where(cols == targets, x, 0.0)), {9, 37}, 0, 0);
    expect_close(std::get<1>(got), values(where(cols != targets, x, 0.0)), {9, 37}, 0, 0);
    expect_close(std::get<2>(got), values(where(cols < targets, x, 0.0)), {9, 37}, 0, 0);
    expect_close(std::get<3>(got), values(where(cols <= targets, x, 0.0)), {9, 37}, 0, 0);
    expect_close(std::get<4>(got), values(where(targets > cols, x, 0.0)), {9, 37}, 0, 0);
    expect_close(std::get<5>(got), values(where(cols >= targets, x, 0.0)), {9, 37}, 0, 0);
    expect_close(std::get<6>(got), values((cols + 3 == targets).to(kFloat32) * x), {9, 37}, 0, 0);
    expect_close(std::get<7>(got),  // a select between masks (a causal mask's where)
                 values(where(cols<targets, cols == targets, cols> targets - 2).to(kFloat32)),
                 {9, 37}, 0, 0);
  });
  EXPECT_NE(code.find("vlanes()"), std::string::npos) << code;
  EXPECT_NE(code.find("vload("), std::string::npos) << code;
}
