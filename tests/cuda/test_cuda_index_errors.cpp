// An index out of range in a GPU kernel (a gather, an embedding, scatter_add) is the CPU's
// coil::Error, raised when the host next waits for the GPU (a copy to the host, synchronize),
// not at the call: a compiled training step queues its backward while its forward's gathers
// still run. The records are then clear: later calls run as usual.
#include <coil/coil.h>
#include <coil/cuda.h>

#include "cuda_testing.h"
#include "testing.h"

using namespace coil;
using namespace coil::testing;

TEST(CudaIndexErrors, RaisedAtTheNextWaitThenClear) {
  COIL_REQUIRE_GPU();
  auto lookup = [](const Tensor& w, const Tensor& ids) { return embedding(w, ids) * 2.0; };
  auto cf = compile(lookup);
  Tensor w = random({10, 4}).cuda();
  Tensor good = randint(0, 10, {6});
  Tensor bad = good.clone();
  bad.slice(0, 4, 5).fill_(12);
  good = good.cuda(), bad = bad.cuda();
  expect_same(cf(w, good), lookup(w.cpu(), good.cpu()), "in range");
  Tensor out;
  EXPECT_NO_THROW(out = cf(w, bad));  // queued: nothing waited for yet
  EXPECT_COIL_ERROR(cuda::synchronize(),
                    "embedding: index 12 is out of range for a dimension of size 10");
  cuda::synchronize();  // raised once
  expect_same(cf(w, good), lookup(w.cpu(), good.cpu()), "in range again");
  // Eagerly too, found by the copy to the host.
  EXPECT_COIL_ERROR(embedding(w, bad).cpu(), "embedding: index 12 is out of range");
  EXPECT_NO_THROW(embedding(w, good).cpu());
}
