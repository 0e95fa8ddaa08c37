// coil::cuda::Event (as torch.cuda.Event): marks in a stream that the host can wait for and
// time the GPU's work between. Skips where there is no GPU; the error paths run everywhere.
#include <coil/coil.h>
#include <coil/cuda.h>

#include "cuda_testing.h"
#include "testing.h"

using namespace coil;

TEST(CudaEvents, WithoutAGpuAnEventIsAClearError) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is present";
  EXPECT_COIL_ERROR(cuda::Event(true), cuda::is_built() ? "is not available" : "without CUDA");
}

TEST(CudaEvents, TimeTheWorkBetweenTwoMarks) {
  COIL_REQUIRE_GPU();
  Tensor x = ones({1 << 24}, kFloat32, kCUDA);
  cuda::Event start(true), end(true);
  EXPECT_TRUE(start.query());  // never recorded: nothing to wait for
  EXPECT_COIL_ERROR(start.elapsed_time(end), "recorded first");
  start.record();
  Tensor s;
  for (int i = 0; i < 20; ++i) s = (x * 2.0).sum();
  end.record();
  end.synchronize();
  EXPECT_TRUE(end.query());
  const double ms = start.elapsed_time(end);
  EXPECT_GT(ms, 0.0);  // 20 passes over 64 MB: some hundreds of microseconds
  EXPECT_LT(ms, 10000.0);
  EXPECT_NEAR(end.elapsed_time(start), -ms, 1e-3);
  EXPECT_EQ(s.item<double>(), 2.0 * (1 << 24));

  cuda::Event moved = std::move(end);  // the mark moves with it
  EXPECT_NEAR(start.elapsed_time(moved), ms, 1e-6);
  EXPECT_COIL_ERROR(end.record(), "moved from");

  cuda::Event plain;  // without timing: a mark to wait for, not to time
  plain.record();
  plain.synchronize();
  EXPECT_TRUE(plain.query());
  EXPECT_COIL_ERROR(start.elapsed_time(plain), "enable_timing");
  EXPECT_COIL_ERROR(cuda::Event(true, 99), "does not exist");
}
