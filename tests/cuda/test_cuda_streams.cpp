// coil::cuda::Stream, StreamGuard and record_stream (as torch.cuda.Stream, torch.cuda.stream()
// and Tensor.record_stream): eager ops, compiled functions and products queued on side streams,
// ordered by waits, against the CPU. Skips where there is no GPU; the error paths run everywhere.
#include <coil/coil.h>
#include <coil/cuda.h>

#include "cuda_testing.h"
#include "testing.h"

using namespace coil;
using namespace coil::testing;

TEST(CudaStreams, WithoutAGpuAStreamIsAClearError) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is present";
  const std::string why = cuda::is_built() ? "is not available" : "without CUDA";
  EXPECT_COIL_ERROR(cuda::Stream(), why);
  EXPECT_COIL_ERROR(cuda::Stream::current(), why);
}

// Work on a side stream sees the default stream's results once it waits for them, and the
// default stream sees the side stream's after waiting in turn; the guard restores the stream
// that was current.
TEST(CudaStreams, SideStreamsAreOrderedByWaits) {
  COIL_REQUIRE_GPU();
  const cuda::Stream main = cuda::Stream::default_stream();
  EXPECT_EQ(cuda::Stream::current(), main);
  cuda::Stream side;
  EXPECT_FALSE(side == main);
  Tensor x = random({1 << 20}), w = random({256, 256}), b = random({1 << 12, 256});
  auto f = compile([](const Tensor& a) { return (a * 2.0).sin() + a; });
  Tensor xg = x.cuda() * 1.0;  // queued on the default stream
  Tensor bg = b.cuda(), wg = w.cuda();
  Tensor pointwise, product, compiled;
  {
    cuda::StreamGuard on(side);
    EXPECT_EQ(cuda::Stream::current(), side);
    side.wait_stream(main);
    pointwise = xg.exp();
    product = matmul(bg, wg);
    compiled = f(xg);
    // Used here and freed on the default stream later: not reused before this stream is done.
    cuda::record_stream(xg, side);
  }
  EXPECT_EQ(cuda::Stream::current(), main);
  main.wait_stream(side);
  expect_same(pointwise, x.exp(), "exp on a side stream");
  expect_same(product, matmul(b, w), "a product on a side stream", 1e-4, 1e-4);
  expect_same(compiled, f(x), "a compiled function on a side stream");
  side.synchronize();
  EXPECT_TRUE(side.query());
}

// Products on two streams at once each have their own cuBLASLt workspace; an event recorded
// on one stream orders another.
TEST(CudaStreams, ConcurrentProductsAndEvents) {
  COIL_REQUIRE_GPU();
  Tensor a = random({512, 512}), c = random({512, 512});
  Tensor ag = a.cuda(), cg = c.cuda();
  cuda::Stream s1, s2;
  const cuda::Stream main = cuda::Stream::current();
  cuda::Event ready;
  ready.record(main);
  std::vector<Tensor> on1, on2;
  for (int i = 0; i < 4; ++i) {
    {
      cuda::StreamGuard g(s1);
      s1.wait_event(ready);
      on1.push_back(matmul(ag, cg));
    }
    {
      cuda::StreamGuard g(s2);
      s2.wait_event(ready);
      on2.push_back(matmul(cg, ag));
    }
  }
  cuda::Event done1, done2;
  done1.record(s1);
  done2.record(s2);
  main.wait_event(done1);
  main.wait_event(done2);
  const Tensor want1 = matmul(a, c), want2 = matmul(c, a);
  for (int i = 0; i < 4; ++i) {
    expect_same(on1[static_cast<size_t>(i)], want1, "stream 1", 1e-4, 1e-3);
    expect_same(on2[static_cast<size_t>(i)], want2, "stream 2", 1e-4, 1e-3);
  }
  cuda::synchronize();  // every stream
  EXPECT_TRUE(s1.query() && s2.query());
}

TEST(CudaStreams, BadUseIsAClearError) {
  COIL_REQUIRE_GPU();
  EXPECT_COIL_ERROR(cuda::Stream(99), "does not exist");
  EXPECT_COIL_ERROR(cuda::record_stream(ones({3}), cuda::Stream()), "expects a tensor on a GPU");
  cuda::Event moved;
  cuda::Event taken = std::move(moved);
  EXPECT_COIL_ERROR(cuda::Stream().wait_event(moved), "moved from");
}
