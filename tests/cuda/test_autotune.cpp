// mode="max-autotune": each product on the GPU times cuBLASLt's candidate algorithms on its first
// call and keeps the fastest; the choice is stored in the disk cache, read back by a later
// process (here: after the process's plans are dropped), and a damaged entry is set aside and
// tuned again. Results match the CPU in every mode.
#include <coil/coil.h>
#include <coil/cuda.h>

#include <filesystem>
#include <fstream>

#include "backends/cuda/cublaslt.h"
#include "cuda_testing.h"
#include "jit/jit_testing.h"
#include "testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

std::vector<Tensor> block(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2) {
  Tensor h = relu(matmul(x, w1) + b1);
  return {softmax(matmul(h, w2), -1), matmul(h.transpose(0, 1), h)};
}

class MaxAutotune : public JitTest {};

}  // namespace

TEST_F(MaxAutotune, ProductsKeepTheFastestCandidateAndMatchTheCpu) {
  COIL_REQUIRE_GPU();
  Tensor x = random({96, 160}), w1 = random({160, 224}), b1 = random({224}), w2 = random({224, 72});
  std::vector<Tensor> want = block(x, w1, b1, w2);
  auto run = [&](const std::string& mode) {
    cuda::forget_matmul_plans();
    return log_of("autotune", [&] {
      CompileOptions o;
      o.mode = mode;
      auto cf = compile(block, o);
      for (int call = 0; call < 3; ++call) {
        SCOPED_TRACE(mode + ", call " + std::to_string(call));
        std::vector<Tensor> got = cf(x.cuda(), w1.cuda(), b1.cuda(), w2.cuda());
        // float32 sums of 160-224 products in another order (a candidate may split the sum):
        // the softmax of such logits differed from the CPU's by 2.8e-5 at 0.82 and 3.3e-5 at
        // 0.10, as the fastest candidate changed from run to run.
        for (size_t i = 0; i < want.size(); ++i)
          expect_close(got[i].cpu(), values(want[i]), want[i].sizes(), 1e-4, 5e-5);
      }
    });
  };
  // The first process times the candidates of each of the three products.
  std::string first = run("max-autotune-no-cudagraphs");
  EXPECT_NE(first.find("candidate 0: "), std::string::npos) << first;
  EXPECT_NE(first.find("kept candidate"), std::string::npos) << first;
  std::vector<std::string> stored;
  for (const std::string& f : cached_files())
    if (f.rfind("autotune/", 0) == 0 && f.find(".algo") != std::string::npos) stored.push_back(f);
  EXPECT_EQ(stored.size(), 3u) << first;
  // A later one reads the choices back, with CUDA graphs recorded after the warm-up call.
  std::string second = run("max-autotune");
  EXPECT_EQ(second.find("candidate 0: "), std::string::npos) << second;
  EXPECT_NE(second.find("chosen in an earlier run"), std::string::npos) << second;
  // A damaged choice is set aside and that product is tuned again.
  std::ofstream(cache_dir_ + "/" + stored[0], std::ios::trunc) << "not an algorithm";
  std::string third = run("max-autotune-no-cudagraphs");
  EXPECT_NE(third.find("kept candidate"), std::string::npos) << third;
  EXPECT_TRUE(std::filesystem::exists(cache_dir_ + "/" + stored[0] + ".damaged"));
  // The default mode takes the heuristic's pick and logs nothing.
  EXPECT_EQ(run("default"), "");
}

// Generated kernels under max-autotune time their launches (other blocks, groups, rows a block,
// rows of 3000 in registers with ragged runs)
// on the first call and keep the fastest, stored on disk per kernel and GPU; every launch
// computes the same results (COIL_KERNEL_LAUNCH runs each in turn).
TEST_F(MaxAutotune, GeneratedKernelsKeepTheFastestLaunchAndMatchTheCpu) {
  COIL_REQUIRE_GPU();
  Tensor x = random({2048, 1024}), y = random({1 << 20}), z = random({256, 3000});
  auto f = [](const Tensor& a, const Tensor& b, const Tensor& c) {
    return std::vector<Tensor>{softmax(a, -1), sin(b) * 2, sum(c, {1})};
  };
  std::vector<Tensor> want = f(x, y, z);
  auto check = [&](const std::string& mode, const std::string& what) {
    auto cf = compile(f, CompileOptions{.mode = mode});
    for (int call = 0; call < 2; ++call) {
      std::vector<Tensor> got = cf(x.cuda(), y.cuda(), z.cuda());
      // The sum of 3000 values in [-2, 2] adds in another order at each launch: its results
      // agree to an ulp of its partial sums, not of the total.
      for (size_t i = 0; i < want.size(); ++i)
        expect_same(got[i], want[i], what, 2e-5, i == 2 ? 1e-4 : 0);
    }
  };
  std::string log = log_of("autotune", [&] { check("max-autotune-no-cudagraphs", "tuned"); });
  EXPECT_NE(log.find("candidate 0 (the heuristics')"), std::string::npos) << log;
  EXPECT_NE(log.find("kept candidate"), std::string::npos) << log;
  size_t stored = 0;
  for (const std::string& file : cached_files())
    stored += file.rfind("autotune/", 0) == 0 && file.find(".launch") != std::string::npos;
  EXPECT_EQ(stored, 3u) << log;
  for (const char* n : {"0", "1", "2", "3", "4", "5", "6"}) {
    setenv("COIL_KERNEL_LAUNCH", n, 1);
    check("max-autotune", std::string("launch ") + n);
  }
  unsetenv("COIL_KERNEL_LAUNCH");
}
