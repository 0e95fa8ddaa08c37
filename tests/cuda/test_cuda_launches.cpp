// Generated kernels overlap the kernel before them on the stream (programmatic dependent launch,
// sm_90 and later: backends/cuda/driver.h): each is scheduled while its predecessor finishes and
// waits, in its first statement, until that one's writes are visible. Skips without a GPU.
#include <coil/coil.h>
#include <coil/cuda.h>

#include "backends/cuda/driver.h"
#include "runtime/cuda_runtime.h"
#include "cuda_testing.h"
#include "testing.h"

using namespace coil;
using namespace coil::testing;

// A chain in which every kernel reads what the one before it wrote (a row's mean, then a
// column's, in turn: no two of them fuse), large enough that each launch comes while the
// previous kernel still runs, gives the CPU's numbers call after call.
TEST(CudaLaunches, ChainsOfDependentKernelsMatchTheCpu) {
  COIL_REQUIRE_GPU();
  if (cuda::device_info(0).major >= 9) {
    EXPECT_TRUE(cuda::programmatic_launches(0)) << "COIL_CUDA_PDL=0 in the environment?";
  }
  auto chain = [](const Tensor& x) {
    Tensor y = x;
    for (int i = 0; i < 6; ++i) {
      y = tanh(y - y.mean({1}, true) + 0.25);
      y = y * rsqrt((y * y).mean({0}, true) + 1e-3);
    }
    return y;
  };
  const Tensor x = random({1024, 1536});
  const Tensor want = chain(x);
  auto f = compile(chain);
  const Tensor xg = x.cuda();
  for (int call = 0; call < 20; ++call)
    expect_same(f(xg), want, "call " + std::to_string(call), 1e-4);
}
