// gather, index_select and embedding compile to generated kernels with indirect loads (no
// extern call): they match eager exactly for every dtype, index dtype and layout, fuse with
// their producers and consumers, and an out-of-range index fails the call as eager does.
#include "backends/cpu/cpp_kernel.h"
#include "testing_stages.h"
#include "testing.h"

namespace coil::testing {
namespace {

class Indexing : public ::testing::Test {
 protected:
  void SetUp() override { compiler_reset(); }
  int64_t count(const char* name) { return counters()[name]; }

  // Compiled and eager results are the same values, bit for bit: a gather only moves data.
  template <typename F, typename... Args>
  void expect_exact(F f, const Args&... args) {
    compiler_reset();
    Tensor got = compile(f)(args...);
    Tensor want = f(args...);
    EXPECT_EQ(got.sizes(), want.sizes());
    EXPECT_EQ(got.dtype(), want.dtype());
    EXPECT_TRUE(equal(got, want));
    EXPECT_EQ(count("extern_calls"), 0);
    EXPECT_GE(count("generated_kernels"), 1);
  }
};

const DType kTables[] = {kFloat32, kFloat64, kInt32};
const DType kIndexTypes[] = {kInt64, kInt32};

TEST_F(Indexing, GatherMatchesEager) {
  manual_seed(3);
  for (DType t : kTables) {
    for (DType it : kIndexTypes) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " table, " + dtype_name(it) + " index");
      Tensor x = random({5, 7, 6}, t, -50, 50);
      // Along every dim, with an index smaller than self outside the gather dim.
      for (int64_t dim : {0, 1, 2, -1}) {
        Shape s = {4, 5, 3};
        const int64_t n = x.size(dim < 0 ? dim + 3 : dim);
        s[static_cast<size_t>(dim < 0 ? dim + 3 : dim)] = 9;
        Tensor idx = randint(0, n, s, it);
        expect_exact([dim](const Tensor& a, const Tensor& i) { return gather(a, dim, i); }, x, idx);
      }
      // A transposed table, a strided index, an index expanded along a dim.
      Tensor xt = noncontiguous(x);
      Tensor strided = randint(0, 7, {5, 14, 6}, it).slice(1, 0, std::nullopt, 2);
      expect_exact([](const Tensor& a, const Tensor& i) { return gather(a, 1, i); }, xt, strided);
      Tensor expanded = randint(0, 6, {5, 7, 1}, it).expand({5, 7, 4});
      expect_exact([](const Tensor& a, const Tensor& i) { return gather(a, -1, i); }, x, expanded);
    }
  }
}

// A pointwise table read at few of its elements (a loss's log-softmax, one class per row) is
// computed at each looked-up element instead of written whole: no buffer of the table's size,
// the rows' statistics read beside the looked-up logit. It matches eager, and an index out of
// range still fails the call.
TEST_F(Indexing, AGatheredPointwiseTableIsComputedAtTheLookups) {
  testing_stages::Compiled c = testing_stages::lowered_and_scheduled(
      R"(def forward(self, x: "f32[8, 64][64, 1]cpu", i: "i64[8, 1][1, 1]cpu"):
    amax: "f32[8, 1][1, 1]cpu" = coil.amax(x, [1], True)
    sub: "f32[8, 64][64, 1]cpu" = coil.sub(x, amax)
    gather: "f32[8, 1][1, 1]cpu" = coil.gather(sub, 1, i)
    return (gather,)
)");
  const std::string program = ir::to_string(c.program);
  EXPECT_EQ(program.find("pointwise[8, 64]"), std::string::npos) << program;
  EXPECT_NE(program.find("sub(load(in0, 64*i0 + ind0; ind0 = load(in1, i0) < 64 for gather), "
                         "load(buf0, i0))"),
            std::string::npos)
      << program;

  auto f = [](const Tensor& a, const Tensor& idx) { return gather(log_softmax(a, 1), 1, idx); };
  manual_seed(5);
  Tensor x = random({16, 40}, kFloat32, -8, 8);
  Tensor idx = randint(0, 40, {16, 1});
  compiler_reset();
  EXPECT_TRUE(allclose(compile(f)(x, idx), f(x, idx), 1e-5, 1e-5));
  Tensor bad = idx.clone();
  bad.slice(0, 3, 4).fill_(40);
  EXPECT_COIL_ERROR(compile(f)(x, bad), "gather: index 40 is out of range");
}

TEST_F(Indexing, IndexSelectMatchesEager) {
  manual_seed(4);
  for (DType t : kTables) {
    for (DType it : kIndexTypes) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " table, " + dtype_name(it) + " index");
      Tensor x = random({6, 5, 33}, t, -50, 50);
      for (int64_t dim : {0, 1, 2}) {
        Tensor idx = randint(0, x.size(dim), {11}, it);
        expect_exact([dim](const Tensor& a, const Tensor& i) { return index_select(a, dim, i); }, x,
                     idx);
      }
      Tensor strided = randint(0, 33, {20}, it).slice(0, 1, std::nullopt, 3);
      expect_exact([](const Tensor& a, const Tensor& i) { return index_select(a, 2, i); },
                   noncontiguous(x), strided);
      Tensor scalar = full({}, 4, it);
      expect_exact([](const Tensor& a, const Tensor& i) { return index_select(a, 0, i); }, x,
                   scalar);
    }
  }
}

TEST_F(Indexing, EmbeddingMatchesEager) {
  manual_seed(5);
  for (DType t : {kFloat32, kFloat64, kInt32, kBFloat16, kFloat16}) {
    for (DType it : kIndexTypes) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " table, " + dtype_name(it) + " index");
      Tensor w = random({10, 37}, t, -50, 50);
      Tensor idx = randint(0, 10, {3, 4}, it);
      expect_exact([](const Tensor& a, const Tensor& i) { return embedding(a, i); }, w, idx);
      expect_exact([](const Tensor& a, const Tensor& i) { return embedding(a, i, 2); }, w, idx);
      // A transposed weight (its rows strided) and indices broadcast along a dim.
      expect_exact([](const Tensor& a, const Tensor& i) { return embedding(a, i); },
                   noncontiguous(w), idx);
      Tensor expanded = randint(0, 10, {1, 5}, it).expand({3, 5});
      expect_exact([](const Tensor& a, const Tensor& i) { return embedding(a, i); }, w, expanded);
    }
  }
}

// The lookup, the scaling and the bias add are one loop nest: a row of the table is read
// contiguously at the position its index gives.
TEST_F(Indexing, EmbeddingScaledPlusBiasIsOneKernel) {
  Tensor w = random({50, 64}), b = random({64});
  Tensor idx = randint(0, 50, {8, 16});
  auto f = [](const Tensor& w, const Tensor& i, const Tensor& b) {
    return embedding(w, i) * 2 + b;
  };
  Tensor got = compile(f)(w, idx, b);
  EXPECT_EQ(count("generated_kernels"), 1);
  EXPECT_EQ(count("extern_calls"), 0);
  EXPECT_TRUE(allclose(got, f(w, idx, b)));
}

// A pointwise computation of the indices fuses into the lookup too.
TEST_F(Indexing, IndexArithmeticFusesIntoTheLookup) {
  Tensor w = random({20, 24});
  Tensor idx = randint(0, 10, {30});
  auto f = [](const Tensor& w, const Tensor& i) { return index_select(w, 0, i * 2 + 1).relu(); };
  Tensor got = compile(f)(w, idx);
  EXPECT_EQ(count("generated_kernels"), 1);
  EXPECT_EQ(count("extern_calls"), 0);
  EXPECT_TRUE(equal(got, f(w, idx)));
}

// The gathered rows are summed where they are read: index_select is a pointwise value, so
// lowering inlines it into the reduction's body (one buffer, one kernel, no fusion decision
// needed), the index loaded once per output row.
TEST_F(Indexing, IndexSelectThenRowSumIsOneKernel) {
  Tensor x = random({40, 300});
  Tensor idx = randint(0, 40, {25});
  auto f = [](const Tensor& x, const Tensor& i) { return sum(index_select(x, 0, i), {1}); };
  Tensor got = compile(f)(x, idx);
  EXPECT_EQ(count("generated_kernels"), 1);
  EXPECT_EQ(count("extern_calls"), 0);
  EXPECT_TRUE(allclose(got, f(x, idx), 1e-5, 1e-5));
  // Over the gathered dim as well, inlined the same way; the kernel runs in row order (column
  // order along memory is left to direct loads) and reads an index per reduction step.
  auto g = [](const Tensor& x, const Tensor& i) { return sum(index_select(x, 0, i), {0}); };
  compiler_reset();
  EXPECT_TRUE(allclose(compile(g)(x, idx), g(x, idx), 1e-5, 1e-5));
  EXPECT_EQ(count("generated_kernels"), 1);
  EXPECT_EQ(count("extern_calls"), 0);
}

TEST_F(Indexing, OutOfRangeIndexFailsTheCallAndLaterCallsWork) {
  Tensor w = random({10, 8});
  auto f = [](const Tensor& w, const Tensor& i) { return embedding(w, i) + 1; };
  auto cf = compile(f);
  Tensor good = randint(0, 10, {6});
  EXPECT_TRUE(allclose(cf(w, good), f(w, good)));
  Tensor bad = good.clone();
  bad.fill_(3);
  bad.slice(0, 4, 5).fill_(12);
  EXPECT_COIL_ERROR(cf(w, bad), "embedding: index 12 is out of range for a dimension of size 10");
  // Negative indices are out of range, as in eager.
  Tensor negative = good.clone();
  negative.slice(0, 0, 1).fill_(-1);
  EXPECT_COIL_ERROR(cf(w, negative), "embedding: index -1 is out of range");
  EXPECT_COIL_ERROR(f(w, negative), "embedding: index -1");
  EXPECT_TRUE(allclose(cf(w, good), f(w, good)));

  // A kernel large enough to run on several threads: whichever thread meets a bad index first
  // records it.
  Tensor wide = random({100, 64});
  Tensor many = randint(0, 100, {2000});
  many.slice(0, 1500, 1501).fill_(100);
  EXPECT_COIL_ERROR(cf(wide, many), "embedding: index 100 is out of range");

  auto g = [](const Tensor& x, const Tensor& i) { return gather(x, 1, i); };
  Tensor x = random({4, 5});
  Tensor gi = randint(0, 5, {4, 5});
  gi.slice(0, 2, 3).fill_(5);
  EXPECT_COIL_ERROR(compile(g)(x, gi), "gather: index 5 is out of range for a dimension of size 5");
  auto h = [](const Tensor& x, const Tensor& i) { return index_select(x, 0, i); };
  EXPECT_COIL_ERROR(compile(h)(x, full({3}, 9, kInt32)),
                    "index_select: index 9 is out of range for a dimension of size 4");
}

// Two lookups over different spaces share one parallel region (a combo kernel) and one list
// of checks: a bad index names the op whose check failed.
TEST_F(Indexing, ChecksOfACombinedKernelNameTheirOp) {
  Tensor w = random({10, 8}), x = random({6, 5});
  auto f = [](const Tensor& w, const Tensor& i, const Tensor& x, const Tensor& j) {
    return std::make_tuple(embedding(w, i), index_select(x, 1, j) + 1);
  };
  auto cf = compile(f);
  Tensor i = randint(0, 10, {7}), j = randint(0, 5, {3});
  auto [a, b] = cf(w, i, x, j);
  auto [ea, eb] = f(w, i, x, j);
  EXPECT_TRUE(equal(a, ea));
  EXPECT_TRUE(equal(b, eb));
  EXPECT_EQ(count("extern_calls"), 0);
  Tensor bad_j = j.clone();
  bad_j.slice(0, 1, 2).fill_(5);
  EXPECT_COIL_ERROR(cf(w, i, x, bad_j),
                    "index_select: index 5 is out of range for a dimension of size 5");
  Tensor bad_i = i.clone();
  bad_i.slice(0, 6, 7).fill_(10);
  EXPECT_COIL_ERROR(cf(w, bad_i, x, j), "embedding: index 10 is out of range");
}

// ---- the loop IR and the generated code of an indirect load ----------------------------------

using testing_stages::Compiled;
using testing_stages::lowered_and_scheduled;

// The table's row is read with vector loads at a scalar base: the index value does not change
// along the vectorised loop, so it is loaded and checked once per step, not per lane.
TEST(IndexingGolden, EmbeddingPrintsItsIndirectLoad) {
  Compiled c = lowered_and_scheduled(
      R"(def forward(self, w: "f32[10, 64][64, 1]cpu", i: "i64[3][1]cpu"):
    embedding: "f32[3, 64][64, 1]cpu" = coil.embedding(w, i, -1)
    return (embedding,)
)");
  EXPECT_EQ(ir::to_string(c.program),
            "in0: f32[10, 64][64, 1] = input 0\n"
            "in1: i64[3][1] = input 1\n"
            "buf0: f32[3, 64][64, 1] = pointwise[3, 64](i0, i1: load(in0, i1 + 64*ind0; ind0 = "
            "load(in1, i0) < 10 for embedding))\n"
            "return (buf0 f32[3, 64][64, 1])\n");
  ASSERT_EQ(c.schedule.kernels.size(), 1u);
  codegen::KernelSource k = cpu::generate_kernel(c.schedule.kernels[0], c.program);
  EXPECT_EQ(k.code, R"(extern "C" void poi_fused_embedding_0(void* const* args) {
  const i64* __restrict in1 = (const i64*)args[0];
  const float* __restrict in0 = (const float*)args[1];
  float* __restrict buf0 = (float*)args[2];
  i64* index_error = (i64*)args[3];
  for (i64 x0 = 0; x0 < 3; ++x0) {
    i64 x1 = 0;
    for (; x1 + COIL_VEC <= 64; x1 += COIL_VEC) {
      i64 t0 = in1[x0];
      i64 t1 = coil_checked_index(t0, 10LL, 0, index_error);
      vf32 t2 = vload(in0 + 64*t1 + x1);
      vstore(buf0 + 64*x0 + x1, t2);
    }
    for (; x1 < 64; ++x1) {
      i64 t3 = in1[x0];
      i64 t4 = coil_checked_index(t3, 10LL, 0, index_error);
      float t5 = in0[64*t4 + x1];
      buf0[64*x0 + x1] = (float)(t5);
    }
  }
}
)");
  ASSERT_EQ(k.index_checks.size(), 1u);
  EXPECT_EQ(k.index_checks[0].op, "embedding");
  EXPECT_EQ(k.index_checks[0].bound, sym::constant(10));
}

// Along the last dim each lane has its own index value: the kernel stays scalar (vector code
// holds no integer lanes), each element checked on its own.
TEST(IndexingGolden, GatherAlongTheLastDimIsScalar) {
  Compiled c = lowered_and_scheduled(
      R"(def forward(self, x: "f32[4, 64][64, 1]cpu", i: "i64[4, 32][32, 1]cpu"):
    gather: "f32[4, 32][32, 1]cpu" = coil.gather(x, 1, i)
    return (gather,)
)");
  ASSERT_EQ(c.schedule.kernels.size(), 1u);
  codegen::KernelSource k = cpu::generate_kernel(c.schedule.kernels[0], c.program);
  EXPECT_FALSE(k.vectorized);
  EXPECT_NE(k.code.find("coil_checked_index(t0, 64LL, 0, index_error)"), std::string::npos)
      << k.code;
}

// The table's producer never joins the reader's kernel, even over the same iteration space:
// the reader needs elements computed at other points. The refusal says so.
TEST(IndexingGolden, ATableProducerDoesNotFuseIntoTheLookup) {
  Compiled c = lowered_and_scheduled(
      R"(def forward(self, w: "f32[3, 64][64, 1]cpu", i: "i64[3][1]cpu"):
    exp: "f32[3, 64][64, 1]cpu" = coil.exp(w)
    embedding: "f32[3, 64][64, 1]cpu" = coil.embedding(exp, i, -1)
    return (embedding,)
)");
  EXPECT_EQ(c.schedule.kernels.size(), 2u);
  std::string decisions;
  for (const schedule::FusionDecision& d : c.schedule.decisions) decisions += d.str() + "\n";
  EXPECT_NE(decisions.find("reads buf0 at a data-dependent index"), std::string::npos) << decisions;
}

}  // namespace
}  // namespace coil::testing
