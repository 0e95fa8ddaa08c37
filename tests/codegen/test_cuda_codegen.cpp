// The CUDA backend's source for every op of the registry compiles with NVRTC (sm_90), with no
// GPU needed: CI checks every generated kernel this way.
#include "cuda_testing.h"
#include "graph/op_examples.h"
#include "testing.h"

using namespace coil;
using namespace coil::testing;

TEST(CudaCodegen, EveryOpCompilesWithNvrtc) {
  if (!cuda::is_built()) GTEST_SKIP() << "coil was built without CUDA";
  Graph g;
  std::vector<Node*> results;
  for (const OpExample& ex : op_examples())
    for (Node* r : add_example(g, ex)) results.push_back(r);
  g.output(results);
  EXPECT_EQ(cuda_compile_errors(g), "");
}
