// mode="reduce-overhead": compiled graphs recorded as CUDA graphs and replayed. Every replay's
// results against the CPU's, outputs the program still holds never overwritten, inputs that are
// views or mutated, inputs read where they are, per-size graphs of a dynamic function, and
// the cases that run without a graph (random draws, work that synchronises, tensors on the CPU)
// giving the same results.
#include <coil/coil.h>
#include <coil/cuda.h>

#include "cuda_testing.h"
#include "testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

CompileOptions reduce_overhead(std::optional<bool> dynamic = std::nullopt) {
  CompileOptions o;
  o.mode = "reduce-overhead";
  o.dynamic = dynamic;
  return o;
}

}  // namespace

// The first call compiles and warms up, the second records, the rest replay: one launch each,
// with new input tensors every call (read where they are: a recording per address the caching
// allocator hands out for them).
TEST(CudaGraphs, ReplaysMatchTheCpu) {
  COIL_REQUIRE_GPU();
  compiler_reset();
  auto f = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    Tensor h = relu(matmul(x, w) + b);
    return std::vector<Tensor>{softmax(h, -1), h.sum({0}), layer_norm(h, {h.size(-1)})};
  };
  auto cf = compile(f, reduce_overhead());
  for (int call = 0; call < 5; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    Tensor x = random({64, 96}), w = random({96, 128}), b = random({128});
    std::vector<Tensor> got = cf(x.cuda(), w.cuda(), b.cuda()), want = f(x, w, b);
    for (size_t i = 0; i < want.size(); ++i)
      expect_same(got[i], want[i], "output " + std::to_string(i));
  }
  EXPECT_EQ(counters()["captures"], 1);
  EXPECT_GE(counters()["cudagraph_recordings"], 1);
  EXPECT_LE(counters()["cudagraph_recordings"], 4);
  EXPECT_EQ(counters()["cudagraph_replays"], 4);  // the recording call launches it too
}

// Every output a replay hands out stays what it was when the program holds it across later
// replays (it moves to memory of its own first); one the program dropped costs no copy.
TEST(CudaGraphs, HeldOutputsAreNeverOverwritten) {
  COIL_REQUIRE_GPU();
  compiler_reset();
  auto f = [](const Tensor& x) { return std::vector<Tensor>{x * 2 + 1, (x * 2 + 1).t()}; };
  auto cf = compile(f, reduce_overhead());
  std::vector<Tensor> inputs, held;
  int64_t per_call = 0;  // copies a replay makes of the outputs the last one handed out
  for (int call = 0; call < 6; ++call) {
    const int64_t copies = counters()["cudagraph_copies"];
    inputs.push_back(random({32, 48}));
    std::vector<Tensor> out = cf(inputs.back().cuda());
    held.push_back(out[0]);
    held.push_back(out[1]);
    per_call = counters()["cudagraph_copies"] - copies;
  }
  EXPECT_GE(per_call, 1);
  for (size_t call = 0; call < inputs.size(); ++call) {
    std::vector<Tensor> want = f(inputs[call]);
    expect_same(held[2 * call], want[0], "call " + std::to_string(call));
    expect_same(held[2 * call + 1], want[1], "call " + std::to_string(call) + ", transposed");
  }
  const int64_t copies = counters()["cudagraph_copies"];
  for (int call = 0; call < 3; ++call) {
    Tensor x = random({32, 48});
    expect_same(cf(x.cuda())[0], f(x)[0], "a dropped output");
  }
  EXPECT_EQ(counters()["cudagraph_copies"], copies + per_call);  // only the last held ones
}

// A function that writes into its input and returns views of it: the program's own tensor is
// written, and the outputs alias what they alias in the default mode (the program's tensor, not
// the graph's static copy of it).
TEST(CudaGraphs, MutatedAndViewedInputsAreTheProgramsTensors) {
  COIL_REQUIRE_GPU();
  compiler_reset();
  auto f = [](const Tensor& x, const Tensor& y) {
    x.mul_(2);
    return std::vector<Tensor>{x.view({-1}), y.t(), x.sum({1})};
  };
  auto graphs = compile(f, reduce_overhead());
  auto plain = compile(f);
  for (int call = 0; call < 4; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    Tensor x = random({8, 16}), y = random({8, 16});
    Tensor gx = x.cuda(), gy = y.cuda(), px = x.cuda(), py = y.cuda();
    std::vector<Tensor> got = graphs(gx, gy), want = plain(px, py);
    expect_same(gx, px.cpu(), "the input, written");
    for (size_t i = 0; i < want.size(); ++i)
      expect_same(got[i], want[i].cpu(), "output " + std::to_string(i));
    gx.add_(1), gy.add_(1), px.add_(1), py.add_(1);  // views see it as in the default mode
    for (size_t i = 0; i < want.size(); ++i)
      expect_same(got[i], want[i].cpu(), "output " + std::to_string(i) + " after a write");
  }
  EXPECT_EQ(counters()["cudagraph_replays"], 3);  // the recording call launches it too
}

// coil::mark_static_address: the graph reads the tensor where it is (a write between calls is
// seen without a copy), and another tensor in its place records a graph of its own.
TEST(CudaGraphs, StaticAddressesAreReadInPlace) {
  COIL_REQUIRE_GPU();
  compiler_reset();
  auto f = [](const Tensor& x, const Tensor& w) { return matmul(x, w).relu(); };
  auto cf = compile(f, reduce_overhead());
  Tensor w = random({24, 16}).cuda(), other = random({24, 16}).cuda();
  mark_static_address(w);
  mark_static_address(other);
  for (int call = 0; call < 4; ++call) {
    Tensor x = random({8, 24});
    expect_same(cf(x.cuda(), w), f(x, w.cpu()), "call " + std::to_string(call));
    w.mul_(-0.5);
  }
  const int64_t recordings = counters()["cudagraph_recordings"];
  EXPECT_GE(recordings, 1);
  for (int call = 0; call < 3; ++call) {
    Tensor x = random({8, 24});
    expect_same(cf(x.cuda(), other), f(x, other.cpu()), "another weight");
  }
  EXPECT_GT(counters()["cudagraph_recordings"], recordings);
  EXPECT_COIL_ERROR(mark_static_address(Tensor()), "undefined");
}

// Inputs are read where they are: a call with the same tensor copies nothing (a write between
// calls is seen); calls rotating over a few tensors have a recording each; past eight addresses
// a call records the graph again, and where that costs more than the copy would (it does, at
// four megabytes) the slot copies from then on. Results held across the moves keep their values.
TEST(CudaGraphs, InputsAreReadWhereTheyAre) {
  COIL_REQUIRE_GPU();
  compiler_reset();
  auto f = [](const Tensor& x) { return x * 2 + 1; };
  auto cf = compile(f, reduce_overhead());
  Tensor gx = random({1024, 1024}).cuda();
  std::vector<Tensor> held, wanted;
  auto call = [&](const Tensor& x) {
    held.push_back(cf(x));
    wanted.push_back(f(x.cpu()));
  };
  for (int k = 0; k < 4; ++k) {
    call(gx);
    gx.add_(1);
  }
  EXPECT_EQ(counters()["cudagraph_recordings"], 1);
  std::vector<Tensor> rotating = {random({1024, 1024}).cuda(), random({1024, 1024}).cuda(),
                                  random({1024, 1024}).cuda()};
  for (int k = 0; k < 9; ++k) call(rotating[k % 3]);
  EXPECT_EQ(counters()["cudagraph_recordings"], 4);  // one per address
  EXPECT_EQ(counters()["cudagraph_rerecordings"], 0);
  // (log_of starts the function afresh: a warm-up, a recording, then a tensor a call.)
  int64_t rerecordings = 0;
  std::vector<Tensor> distinct;
  std::string log = log_of("cudagraphs", [&] {
    for (int k = 0; k < 12; ++k) {
      distinct.push_back(random({1024, 1024}).cuda());
      call(distinct.back());
    }
    rerecordings = counters()["cudagraph_rerecordings"];
  });
  EXPECT_NE(log.find("copied from the next move on"), std::string::npos) << log;
  EXPECT_EQ(rerecordings, 2);  // in place at the ninth address, then with a copy
  for (size_t k = 0; k < held.size(); ++k)
    expect_same(held[k], wanted[k], "call " + std::to_string(k));
}

// An input the function writes: the program's tensor is written each call.
TEST(CudaGraphs, MutatedInputsReadInPlaceAreThePrograms) {
  COIL_REQUIRE_GPU();
  compiler_reset();
  auto f = [](const Tensor& x) {
    x.mul_(0.5);
    return x.sum({1});
  };
  auto graphs = compile(f, reduce_overhead());
  auto plain = compile(f);
  Tensor x = random({512, 1024});
  Tensor gx = x.cuda(), px = x.cuda();
  for (int call = 0; call < 5; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    expect_same(graphs(gx), plain(px).cpu(), "the sums");
    expect_same(gx, px.cpu(), "the input, written");
  }
  EXPECT_EQ(counters()["cudagraph_replays"], 4);
}

// A dynamic function records a graph per size, all in one pool, and each size's replays match.
TEST(CudaGraphs, DynamicFunctionsRecordAGraphPerSize) {
  COIL_REQUIRE_GPU();
  compiler_reset();
  auto f = [](const Tensor& x) { return softmax(x, -1) * 2; };
  auto cf = compile(f, reduce_overhead(true));
  std::vector<Tensor> held;
  for (int round = 0; round < 3; ++round)
    for (int64_t rows : {4, 9, 17}) {
      SCOPED_TRACE(std::to_string(rows) + " rows, round " + std::to_string(round));
      Tensor x = random({rows, 40});
      held.push_back(cf(x.cuda()));
      expect_same(held.back(), f(x), "softmax");
    }
  EXPECT_EQ(counters()["captures"], 1);
  EXPECT_GE(counters()["cudagraph_recordings"], 3);  // a size each, at an address each
  EXPECT_EQ(counters()["cudagraph_replays"], 6);     // rounds 2 (recording, then launching) and 3
}

// Where a graph cannot be recorded the function runs as in the default mode: random draws
// (every replay would draw the same numbers), tensors on the CPU, and (whether or not it can be
// recorded) average pooling with ceil_mode, which the GPU computes on the CPU.
TEST(CudaGraphs, GraphsThatCannotBeRecordedRunWithoutOne) {
  COIL_REQUIRE_GPU();
  std::string log = log_of("cudagraphs", [] {
    auto noisy = compile([](const Tensor& x) { return x + rand_like(x); }, reduce_overhead());
    Tensor x = random({16, 16}).cuda();
    std::vector<Tensor> draws;
    for (int call = 0; call < 4; ++call) draws.push_back((noisy(x) - x).cpu());
    EXPECT_FALSE(allclose(draws[2], draws[3]));
    EXPECT_TRUE(allclose(draws[3], draws[3].clamp(0, 1)));
    EXPECT_EQ(counters()["cudagraph_replays"], 0);
  });
  EXPECT_NE(log.find("it draws random numbers"), std::string::npos) << log;
  compiler_reset();

  auto on_cpu = compile([](const Tensor& t) { return t * 3; }, reduce_overhead());
  Tensor img = random({2, 3, 9, 9});
  for (int call = 0; call < 3; ++call) EXPECT_TRUE(allclose(on_cpu(img), img * 3));
  EXPECT_EQ(counters()["cudagraph_replays"], 0);

  auto pool = [](const Tensor& t) { return avg_pool2d(t, {2, 2}, {2, 2}, {0, 0}, true) + 1; };
  auto pooled = compile(pool, reduce_overhead());
  for (int call = 0; call < 3; ++call) expect_same(pooled(img.cuda()), pool(img), "ceil_mode pool");
}

// The graphs' memory returns to the allocator once the function is gone.
TEST(CudaGraphs, MemoryReturnsWhenTheFunctionGoes) {
  COIL_REQUIRE_GPU();
  compiler_reset();
  Tensor x = random({256, 256}).cuda();
  const int64_t before = cuda::memory_allocated();
  {
    auto cf = compile([](const Tensor& t) { return exp(t) + 1; }, reduce_overhead());
    for (int call = 0; call < 4; ++call) cf(x);
    EXPECT_GT(cuda::memory_allocated(), before);  // the static input and the graph's output
  }
  EXPECT_EQ(cuda::memory_allocated(), before);
}
