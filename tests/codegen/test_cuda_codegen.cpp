// The CUDA backend's source for every op of the registry compiles with NVRTC (sm_90), with no
// GPU needed: CI checks every generated kernel this way.
#include "compile/graph_cache.h"
#include "cuda_testing.h"
#include "graph/op_examples.h"
#include "ops/meta_util.h"
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

// Every generated kernel may be launched while the kernel before it still runs (driver.h), so
// its first statement, before any access to memory, waits for that kernel: pointwise, combo,
// row and column kernels alike (here a row kernel with sin fused, and a column sum with cos).
TEST(CudaCodegen, EveryKernelFirstWaitsForThePreviousOne) {
  if (!cuda::is_built()) GTEST_SKIP() << "coil was built without CUDA";
  Graph g;
  Node* x = g.placeholder("x", ops::contiguous_meta(kFloat32, {64, 48}));
  Node* w = g.placeholder("w", ops::contiguous_meta(kFloat32, {48}));
  Node* s = g.call(OpId::softmax, {g.call(OpId::add, {x, w}), int64_t{1}});
  g.output({s, g.call(OpId::sum, {x, Shape{0}}), g.call(OpId::sin, {x}), g.call(OpId::cos, {w})});
  const std::string source = cuda_module_source(g);
  size_t kernels = 0;
  for (size_t at = source.find("__global__"); at != std::string::npos;
       at = source.find("__global__", at + 1)) {
    const size_t body = source.find(") {\n", at);
    ASSERT_NE(body, std::string::npos);
    EXPECT_EQ(source.compare(body, 34, ") {\n  coil_wait_previous_kernel();"), 0)
        << source.substr(at, 400);
    ++kernels;
  }
  EXPECT_GE(kernels, 2u) << source;
  EXPECT_EQ(cuda_compile_errors(g), "");
}

// A dynamic graph's kernels (sizes as by-value arguments, loop bounds and indices over them)
// compile too.
TEST(CudaCodegen, DynamicKernelsCompileWithNvrtc) {
  if (!cuda::is_built()) GTEST_SKIP() << "coil was built without CUDA";
  Graph g;
  g.set_shape_env(std::make_shared<ShapeEnv>());
  ShapeEnv& env = *g.shape_env();
  sym::Expr rows = env.create_symbol(8, "x.size(0)"), cols = env.create_symbol(16, "x.size(1)");
  Node* x = g.placeholder("x", TensorMeta{kFloat32, {8, 16}, {16, 1}, 0, kCPU},
                          SymLayout::contiguous({rows, cols}));
  Node* y = g.call(OpId::softmax, {g.call(OpId::exp, {x}), int64_t{1}});
  Node* cols_sum = g.call(OpId::sum, {g.call(OpId::mul, {y, x}), Shape{0}});
  Node* flat = g.call(OpId::relu, {g.call(OpId::view, {x, Shape{-1}})});
  g.output({y, cols_sum, flat});
  EXPECT_EQ(cuda_compile_errors(g), "");
}

// An index that divides by sizes known only at run time (a channel's parameter read from a flat
// index over [n, c, h, w]) divides through dividers the launch computes (a multiply and a shift
// per element, not a 64-bit division); a static graph's constant divisors need none.
TEST(CudaCodegen, RunTimeDivisorsUseDividers) {
  if (!cuda::is_built()) GTEST_SKIP() << "coil was built without CUDA";
  Graph g;
  g.set_shape_env(std::make_shared<ShapeEnv>());
  ShapeEnv& env = *g.shape_env();
  SymShape s;
  for (int64_t d : {2, 3, 5, 7})
    s.push_back(env.create_symbol(d, "x.size(" + std::to_string(d) + ")"));
  Node* x =
      g.placeholder("x", ops::contiguous_meta(kFloat32, {2, 3, 5, 7}), SymLayout::contiguous(s));
  Node* m = g.placeholder("m", ops::contiguous_meta(kFloat32, {3, 1, 1}),
                          SymLayout::contiguous({s[1], sym::constant(1), sym::constant(1)}));
  g.output({g.call(OpId::relu, {g.call(OpId::sub, {x, m})})});
  const std::string source = cuda_module_source(g);
  EXPECT_NE(source.find("coil_divider coil_dv1 /* s1 */"), std::string::npos) << source;
  EXPECT_NE(source.find("coil_divider coil_dv0 /* s2*s3 */"), std::string::npos) << source;
  EXPECT_NE(source.find("coil_udiv("), std::string::npos) << source;
  // The parameter is the same for each run of four where the plane's size is a multiple of
  // four: the vector path checks that, and reads it once, at the run's first element.
  EXPECT_NE(source.find(" % 4 == 0)"), std::string::npos) << source;
  EXPECT_NE(source.find("coil_udiv(coil_base, coil_dv0)"), std::string::npos) << source;
  EXPECT_EQ(cuda_compile_errors(g), "");

  Graph fixed;
  Node* fx = fixed.placeholder("x", ops::contiguous_meta(kFloat32, {2, 3, 5, 7}));
  Node* fm = fixed.placeholder("m", ops::contiguous_meta(kFloat32, {3, 1, 1}));
  fixed.output({fixed.call(OpId::relu, {fixed.call(OpId::sub, {fx, fm})})});
  EXPECT_EQ(cuda_module_source(fixed).find("coil_dv"), std::string::npos);
}

// A division of an index by a constant runs in 32 bits only where the numerator's range fits:
// a row's statistic read by each element of rows of 50257 (a loss's gradient over GPT-2's
// vocabulary) divides in 32 bits at 4096 rows (205.8M elements) and in 64 at 65536 (3.3G).
TEST(CudaCodegen, IndexDivisionsByAConstantNarrowOnlyWhereTheyFit) {
  if (!cuda::is_built()) GTEST_SKIP() << "coil was built without CUDA";
  for (auto [rows, narrow] : {std::pair<int64_t, bool>{4096, true}, {65536, false}}) {
    Graph g;
    Node* x = g.placeholder("x", ops::contiguous_meta(kFloat32, {rows, 50257}));
    Node* m = g.placeholder("m", ops::contiguous_meta(kFloat32, {rows, 1}));
    g.output({g.call(OpId::exp, {g.call(OpId::sub, {x, m})})});
    const std::string source = cuda_module_source(g);
    EXPECT_EQ(source.find("in1[coil_div32(i, 50257)]") != std::string::npos, narrow) << source;
    EXPECT_EQ(source.find("in1[i / 50257]") != std::string::npos, !narrow) << source;
    EXPECT_EQ(cuda_compile_errors(g), "");
  }
}

// The sine and cosine of one value are one sincos call (one argument reduction for both), in
// float32 and float64; a sine alone stays sinf.
TEST(CudaCodegen, SineAndCosineOfOneValueShareACall) {
  if (!cuda::is_built()) GTEST_SKIP() << "coil was built without CUDA";
  for (DType dt : {kFloat32, kFloat64}) {
    Graph g;
    Node* x = g.placeholder("x", ops::contiguous_meta(dt, {1000}));
    Node *s = g.call(OpId::sin, {x}), *c = g.call(OpId::cos, {x});
    g.output({g.call(OpId::add, {g.call(OpId::mul, {s, s}), g.call(OpId::mul, {c, c})})});
    const std::string source = cuda_module_source(g);
    const std::string call = dt == kFloat32 ? "sincosf(" : "sincos(";
    EXPECT_NE(source.find(call), std::string::npos) << source;
    EXPECT_EQ(source.find(dt == kFloat32 ? "sinf(" : " sin("), std::string::npos) << source;
    EXPECT_EQ(cuda_compile_errors(g), "");
  }
  Graph alone;
  Node* y = alone.placeholder("y", ops::contiguous_meta(kFloat32, {1000}));
  alone.output({alone.call(OpId::sin, {y})});
  const std::string source = cuda_module_source(alone);
  EXPECT_NE(source.find("sinf("), std::string::npos) << source;
  EXPECT_EQ(source.find("sincosf("), std::string::npos) << source;
}

// Pointwise kernels whose stores (and some loads) are consecutive in the flat index take a
// vector of elements per thread with vector accesses (a broadcast operand is still read one by
// one), in every dtype, and compile: four, or eight where the narrowest access is of 16-bit
// values (16 bytes of those; a float32 result beside them then takes two 16-byte stores).
TEST(CudaCodegen, PointwiseKernelsUseVectorAccesses) {
  if (!cuda::is_built()) GTEST_SKIP() << "coil was built without CUDA";
  struct Want {
    DType t;
    std::string vector;
  };
  for (const Want& w :
       {Want{kFloat32, "coil_vec<float, 4>"}, Want{kFloat16, "coil_vec<unsigned short, 8>"},
        Want{kBFloat16, "coil_vec<unsigned short, 8>"}, Want{kFloat64, "coil_vec<double, 4>"},
        Want{kBool, "coil_vec<bool, 4>"}}) {
    SCOPED_TRACE(dtype_name(w.t));
    Graph g;
    Node* x = g.placeholder("x", ops::contiguous_meta(w.t, {64, 48}));
    Node* b = g.placeholder("b", ops::contiguous_meta(w.t, {48}));
    Node* y = w.t == kBool ? g.call(OpId::logical_and, {x, b})
                           : g.call(OpId::add, {g.call(OpId::sin, {x}), g.call(OpId::cos, {b})});
    g.output({y});
    const std::string source = cuda_module_source(g);
    EXPECT_NE(source.find(w.vector), std::string::npos) << source;
    EXPECT_EQ(cuda_compile_errors(g), "");
  }
  Graph g;
  Node* x = g.placeholder("x", ops::contiguous_meta(kBFloat16, {64, 48}));
  g.output({g.call(OpId::to_dtype, {g.call(OpId::relu, {x}), kFloat32})});
  const std::string source = cuda_module_source(g);
  EXPECT_NE(source.find("coil_vec<unsigned short, 8>"), std::string::npos) << source;
  EXPECT_NE(source.find("coil_vec<float, 8>"), std::string::npos) << source;
  EXPECT_EQ(cuda_compile_errors(g), "");
}

// A product's operand padded with rows (pad_products' N of a tied head) reads its rows eight at a
// time: the clamped row index moves only between runs of eight, so the vector is read at the
// run's first element; padded columns are read one by one.
TEST(CudaCodegen, PaddedRowsAreReadEightAtATime) {
  if (!cuda::is_built()) GTEST_SKIP() << "coil was built without CUDA";
  for (auto [pads, vector] : {std::pair{Shape{0, 0, 0, 5}, true}, {Shape{0, 5}, false}}) {
    Graph g;
    Node* w = g.placeholder("w", ops::contiguous_meta(kFloat32, {67, 64}));
    Node* cast = g.call(OpId::to_dtype, {w, kBFloat16});
    g.output({g.call(OpId::pad, {cast, pads, std::string("constant"), 0.0})});
    const std::string source = cuda_module_source(g);
    EXPECT_EQ(source.find("coil_vec<float, 8>*>(in0 + (") != std::string::npos, vector) << source;
    EXPECT_NE(source.find("coil_vec<unsigned short, 8>"), std::string::npos) << source;
    EXPECT_EQ(cuda_compile_errors(g), "");
  }
}

// A row's passes read and write it four elements at a time where they are consecutive along it
// (softmax's three passes, layer norm's two), and compile.
TEST(CudaCodegen, RowPassesUseVectorAccesses) {
  if (!cuda::is_built()) GTEST_SKIP() << "coil was built without CUDA";
  Graph g;
  Node* x = g.placeholder("x", ops::contiguous_meta(kFloat32, {64, 512}));
  Node* w = g.placeholder("w", ops::contiguous_meta(kFloat32, {512}));
  g.output(
      {g.call(OpId::softmax, {x, int64_t{1}}), g.call(OpId::layer_norm, {x, Shape{512}, w, w})});
  const std::string source = cuda_module_source(g);
  EXPECT_NE(source.find("for (int coil_k = 0; coil_k < 2; ++coil_k)"), std::string::npos) << source;
  EXPECT_EQ(cuda_compile_errors(g), "");

  // Rows no group covers in runs of four (1000 elements): each pass loops over the row.
  Graph odd;
  Node* y = odd.placeholder("y", ops::contiguous_meta(kFloat32, {64, 1000}));
  odd.output({odd.call(OpId::softmax, {y, int64_t{1}})});
  const std::string looped = cuda_module_source(odd);
  EXPECT_NE(looped.find("for (i64 coil_base = (i64)threadIdx.x * 4;"), std::string::npos) << looped;
  EXPECT_EQ(cuda_compile_errors(odd), "");
}

// Rows in registers whose narrowest access is of 16-bit values take eight elements an access
// (16 bytes): a bf16 softmax over 1024 as 64 threads of two runs, a float16 layer norm over 768
// (its float32 weight beside it, eight an access too); a bf16 softmax over 1000, which no group
// covers, loops over the row four at a time (as float32's).
TEST(CudaCodegen, SixteenBitRowsTakeEightAnAccess) {
  if (!cuda::is_built()) GTEST_SKIP() << "coil was built without CUDA";
  Graph soft;
  Node* x = soft.placeholder("x", ops::contiguous_meta(kBFloat16, {4096, 1024}));
  soft.output({soft.call(OpId::softmax, {x, int64_t{1}})});
  const std::string s = cuda_module_source(soft);
  EXPECT_NE(s.find("coil_vec<unsigned short, 8>*>(in0"), std::string::npos) << s;
  EXPECT_EQ(s.find("coil_vec<unsigned short, 4>"), std::string::npos) << s;
  EXPECT_NE(s.find("coil_group_all_reduce<64>(acc_"), std::string::npos) << s;
  EXPECT_EQ(cuda_compile_errors(soft), "");

  Graph norm;
  Node* y = norm.placeholder("y", ops::contiguous_meta(kFloat16, {4096, 768}));
  Node* w = norm.placeholder("w", ops::contiguous_meta(kFloat32, {768}));
  norm.output({norm.call(
      OpId::to_dtype,
      {norm.call(OpId::layer_norm, {norm.call(OpId::to_dtype, {y, kFloat32}), Shape{768}, w, w}),
       kFloat16})});
  const std::string n = cuda_module_source(norm);
  EXPECT_NE(n.find("coil_vec<unsigned short, 8>"), std::string::npos) << n;
  EXPECT_NE(n.find("coil_vec<float, 8>"), std::string::npos) << n;
  EXPECT_EQ(cuda_compile_errors(norm), "");

  Graph odd;
  Node* z = odd.placeholder("z", ops::contiguous_meta(kBFloat16, {64, 1000}));
  odd.output({odd.call(OpId::softmax, {z, int64_t{1}})});
  const std::string looped = cuda_module_source(odd);
  EXPECT_NE(looped.find("for (i64 coil_base = (i64)threadIdx.x * 4;"), std::string::npos) << looped;
  EXPECT_EQ(cuda_compile_errors(odd), "");
}

// A reduction reads a buffer's last use with the streaming hint (evict first: the L2 cache keeps
// what later kernels read instead), in the last pass that reads it; a buffer that a later step
// reads again, or that a write of the kernel may alias, keeps to plain loads, as does a weight
// that every row reads (its last use too, but read again by each row).
TEST(CudaCodegen, ReductionsStreamTheLastUseOfABuffer) {
  if (!cuda::is_built()) GTEST_SKIP() << "coil was built without CUDA";
  const TensorMeta rows = ops::contiguous_meta(kFloat32, {64, 3000});
  Graph last;
  last.output({last.call(OpId::sum, {last.placeholder("x", rows), Shape{1}})});
  const std::string streamed = cuda_module_source(last);
  EXPECT_NE(streamed.find("coil_ld_stream(reinterpret_cast<const coil_vec<float, 4>*>(in0 + "),
            std::string::npos)
      << streamed;
  EXPECT_NE(streamed.find("coil_ld_stream(&in0["), std::string::npos) << streamed;
  EXPECT_EQ(cuda_compile_errors(last), "");

  // Softmax over long rows: three passes read x, the last of them streams it.
  Graph passes;
  passes.output({passes.call(OpId::softmax, {passes.placeholder("x", rows), int64_t{1}})});
  const std::string soft = cuda_module_source(passes);
  const size_t first_stream = soft.find("coil_ld_stream(reinterpret_cast");
  const size_t first_plain = soft.find("= *reinterpret_cast<const coil_vec<float, 4>*>(in0 + ");
  ASSERT_NE(first_stream, std::string::npos) << soft;
  EXPECT_LT(first_plain, first_stream) << soft;  // the earlier passes' plain loads
  EXPECT_EQ(cuda_compile_errors(passes), "");

  // x read again by the product after the sum: no hint.
  Graph again;
  Node* x = again.placeholder("x", rows);
  Node* w = again.placeholder("w", ops::contiguous_meta(kFloat32, {3000, 8}));
  again.output({again.call(OpId::sum, {x, Shape{1}}), again.call(OpId::mm, {x, w})});
  const std::string kept = cuda_module_source(again);
  EXPECT_EQ(kept.find("coil_ld_stream(&"), std::string::npos) << kept;
  EXPECT_EQ(kept.find("coil_ld_stream(reinterpret_cast"), std::string::npos) << kept;
}

// Rows a group of threads covers in runs of four keep the row in registers: softmax's three
// passes read it from memory once, 128 threads a row, a row a block (narrower groups share
// blocks of 128 threads: a layer norm over 768, 64 threads a row, two rows a block); a layer
// norm's weight, read by one pass, is read there. Rows of run-time length too, where they fit.
TEST(CudaCodegen, RowsAGroupCoversStayInRegisters) {
  if (!cuda::is_built()) GTEST_SKIP() << "coil was built without CUDA";
  Graph g;
  Node* x = g.placeholder("x", ops::contiguous_meta(kFloat32, {4096, 1024}));
  g.output({g.call(OpId::softmax, {x, int64_t{1}})});
  const std::string source = cuda_module_source(g);
  size_t reads = 0;
  for (size_t at = 0; (at = source.find("coil_vec<float, 4>*>(in0", at)) != std::string::npos; ++at)
    ++reads;
  EXPECT_EQ(reads, 1u) << source;
  EXPECT_NE(source.find("coil_group_all_reduce<128>(acc_"), std::string::npos) << source;
  EXPECT_NE(source.find("(i64)blockIdx.x * 1 + threadIdx.x / 128"), std::string::npos) << source;
  EXPECT_EQ(cuda_compile_errors(g), "");

  Graph norm;
  Node* y = norm.placeholder("y", ops::contiguous_meta(kFloat32, {4096, 1024}));
  Node* v = norm.placeholder("v", ops::contiguous_meta(kFloat32, {1024}));
  norm.output({norm.call(OpId::layer_norm, {y, Shape{1024}, v, v})});
  const std::string ln = cuda_module_source(norm);
  EXPECT_NE(ln.find("coil_row0[coil_k] = *reinterpret_cast"), std::string::npos) << ln;
  EXPECT_EQ(ln.find("coil_row1"), std::string::npos) << ln;
  EXPECT_EQ(cuda_compile_errors(norm), "");
  Graph narrow;
  Node* n768 = narrow.placeholder("y", ops::contiguous_meta(kFloat32, {4096, 768}));
  Node* v768 = narrow.placeholder("v", ops::contiguous_meta(kFloat32, {768}));
  narrow.output({narrow.call(OpId::layer_norm, {n768, Shape{768}, v768, v768})});
  const std::string ln768 = cuda_module_source(narrow);
  EXPECT_NE(ln768.find("(i64)blockIdx.x * 2 + threadIdx.x / 64"), std::string::npos) << ln768;

  // A row of run-time length is grouped by its hint: whole runs of the group up to the hint's
  // length take the unrolled passes, skipping runs past the end; other rows loop.
  Graph dynamic;
  dynamic.set_shape_env(std::make_shared<ShapeEnv>());
  ShapeEnv& env = *dynamic.shape_env();
  SymShape s = {env.create_symbol(4096, "z.size(0)"), env.create_symbol(1024, "z.size(1)")};
  Node* z = dynamic.placeholder("z", ops::contiguous_meta(kFloat32, {4096, 1024}),
                                SymLayout::contiguous(s));
  dynamic.output({dynamic.call(OpId::softmax, {z, int64_t{1}})});
  const std::string ds = cuda_module_source(dynamic);
  EXPECT_NE(ds.find("coil_group_all_reduce<128>(acc_"), std::string::npos) << ds;
  EXPECT_NE(ds.find("const bool coil_fast = (s1) % 512 == 0 && s1 <= 1024 && "), std::string::npos)
      << ds;
  EXPECT_NE(ds.find(" if ((i64)coil_k * 512 < s1)"), std::string::npos) << ds;
  EXPECT_NE(ds.find("for (i64 coil_base = (i64)coil_t * 4; coil_base < s1; coil_base += 512)"),
            std::string::npos)
      << ds;
  EXPECT_EQ(cuda_compile_errors(dynamic), "");
}

// A vectorised thread's four elements of an NCHW tensor lie in one channel when a plane's size
// divides by four: the channel's parameter is read at the first of them (the compiler merges
// the four reads and what follows from them alone); with planes of odd size, at each.
TEST(CudaCodegen, ParametersOfAChannelAreReadOncePerVector) {
  if (!cuda::is_built()) GTEST_SKIP() << "coil was built without CUDA";
  for (auto [plane, once] : {std::pair{56, true}, {7, false}}) {
    Graph g;
    Node* x = g.placeholder("x", ops::contiguous_meta(kFloat32, {32, 64, plane, plane}));
    Node* w = g.placeholder("w", ops::contiguous_meta(kFloat32, {64, 1, 1}));
    g.output({g.call(OpId::relu, {g.call(OpId::mul, {x, w})})});
    const std::string source = cuda_module_source(g);
    const std::string first = "[coil_div32(coil_mod32(coil_base, " +
                              std::to_string(64 * plane * plane) + "), " +
                              std::to_string(plane * plane) + ")]";
    EXPECT_EQ(source.find(first) != std::string::npos, once) << source;
    EXPECT_EQ(cuda_compile_errors(g), "");
  }
}

// Short rows of a fixed length take a thread each (a sum over a batch of 8, a softmax and an
// argmax over rows of 5), many rows of up to 1024 a warp each, long rows and rows of run-time
// length a block each; all compile.
TEST(CudaCodegen, ShortRowsTakeAThreadEach) {
  if (!cuda::is_built()) GTEST_SKIP() << "coil was built without CUDA";
  Graph g;
  Node* x = g.placeholder("x", ops::contiguous_meta(kFloat32, {8, 3000}));
  Node* s = g.placeholder("s", ops::contiguous_meta(kFloat32, {600, 5}));
  g.output({g.call(OpId::sum, {x, Shape{0}}), g.call(OpId::softmax, {s, int64_t{1}}),
            g.call(OpId::argmax, {s, int64_t{1}, false})});
  const std::string source = cuda_module_source(g);
  EXPECT_NE(source.find("for (i64 r = 0; r < 8; ++r)"), std::string::npos) << source;
  EXPECT_NE(source.find("for (i64 r = 0; r < 5; ++r)"), std::string::npos) << source;
  EXPECT_EQ(source.find("coil_block_reduce(acc_"), std::string::npos) << source;
  EXPECT_EQ(cuda_compile_errors(g), "");

  Graph long_rows;
  Node* y = long_rows.placeholder("y", ops::contiguous_meta(kFloat32, {8, 3000}));
  long_rows.output({long_rows.call(OpId::sum, {y, Shape{1}})});
  EXPECT_NE(cuda_module_source(long_rows).find("coil_block_reduce(acc_"), std::string::npos);

  // Many rows of a few hundred that no group covers in runs of four take a warp each, eight a
  // block.
  Graph scores;
  Node* w = scores.placeholder("w", ops::contiguous_meta(kFloat32, {4096, 500}));
  scores.output({scores.call(OpId::softmax, {w, int64_t{1}})});
  const std::string warp_source = cuda_module_source(scores);
  EXPECT_NE(warp_source.find("coil_warp_all_reduce(acc_"), std::string::npos) << warp_source;
  EXPECT_EQ(warp_source.find("coil_block_reduce(acc_"), std::string::npos) << warp_source;
  EXPECT_EQ(cuda_compile_errors(scores), "");

  // A row of run-time length may be long, however short at the hints: a block folds it.
  Graph dynamic;
  dynamic.set_shape_env(std::make_shared<ShapeEnv>());
  sym::Expr n = dynamic.shape_env()->create_symbol(8, "z.size(0)");
  Node* z = dynamic.placeholder("z", TensorMeta{kFloat32, {8, 3000}, {3000, 1}, 0, kCPU},
                                SymLayout::contiguous({n, sym::constant(3000)}));
  dynamic.output({dynamic.call(OpId::sum, {z, Shape{0}})});
  EXPECT_NE(cuda_module_source(dynamic).find("coil_block_reduce(acc_"), std::string::npos);
}

// Reductions down columns (a softmax over dim 0, a sum over a batch) take 32 columns a block,
// so that a warp reads consecutive elements, when there are enough columns to fill the GPU
// (fewer long ones are split first); rows and arg reductions (whose index the column reduction
// does not carry) keep a block per row.
TEST(CudaCodegen, ColumnsTakeThirtyTwoABlock) {
  if (!cuda::is_built()) GTEST_SKIP() << "coil was built without CUDA";
  Graph g;
  Node* x = g.placeholder("x", ops::contiguous_meta(kFloat32, {768, 8192}));
  Node* y = g.placeholder("y", ops::contiguous_meta(kFloat32, {300, 5000}));
  g.output({g.call(OpId::sum, {g.call(OpId::mul, {x, x}), Shape{0}}),
            g.call(OpId::softmax, {y, int64_t{0}})});
  const std::string source = cuda_module_source(g);
  EXPECT_NE(source.find("coil_column_reduce(acc_"), std::string::npos) << source;
  EXPECT_EQ(source.find("coil_block_reduce(acc_"), std::string::npos) << source;
  EXPECT_EQ(cuda_compile_errors(g), "");

  // Few long columns (a bias's gradient over 4096 tokens) are split in 32 pieces: partials laid
  // out [pieces, columns], summed 32 columns a block, then each column's pieces a thread each.
  Graph split;
  Node* w = split.placeholder("w", ops::contiguous_meta(kFloat32, {4096, 768}, Device("cuda")));
  split.output({split.call(OpId::sum, {w, Shape{0}})});
  const std::string split_source = cuda_module_source(split);
  EXPECT_NE(split_source.find("coil_column_reduce(acc_"), std::string::npos) << split_source;
  EXPECT_NE(split_source.find("for (i64 r = 0; r < 32; ++r)"), std::string::npos) << split_source;
  EXPECT_EQ(cuda_compile_errors(split), "");

  // A layer norm's weight gradient, sum over tokens of g * (x - mean) * rstd: the statistics
  // are read along the tokens, but the same by every column, so it is still split and reduced
  // down columns; so is a bias gradient over a cat of three parts laid out as heads
  // ([batch, heads, tokens, features] read as [tokens, 3 * heads * features]: a query, key and
  // value projection's), whose consecutive columns are consecutive but at a head's edge.
  Graph ln;
  const Device gpu("cuda");
  Node* gr = ln.placeholder("g", ops::contiguous_meta(kFloat32, {4096, 768}, gpu));
  Node* xs = ln.placeholder("x", ops::contiguous_meta(kFloat32, {4096, 768}, gpu));
  Node* mean = ln.placeholder("mean", ops::contiguous_meta(kFloat32, {4096, 1}, gpu));
  Node* rstd = ln.placeholder("rstd", ops::contiguous_meta(kFloat32, {4096, 1}, gpu));
  Node* xhat = ln.call(OpId::mul, {ln.call(OpId::sub, {xs, mean}), rstd});
  std::vector<Node*> heads;
  for (const char* name : {"q", "k", "v"}) {
    Node* h = ln.placeholder(name, ops::contiguous_meta(kFloat32, {8, 12, 512, 64}, gpu));
    Node* tokens = ln.call(OpId::permute, {h, Shape{0, 2, 1, 3}});
    heads.push_back(ln.call(OpId::reshape, {tokens, Shape{4096, 768}}));
  }
  Node* qkv = ln.call(OpId::cat, {heads, int64_t{1}});
  ln.output({ln.call(OpId::sum, {ln.call(OpId::mul, {gr, xhat}), Shape{0}}),
             ln.call(OpId::sum, {qkv, Shape{0}})});
  const std::string ln_source = cuda_module_source(ln);
  EXPECT_EQ(ln_source.find("coil_block_reduce(acc_"), std::string::npos) << ln_source;
  size_t columns = 0;
  for (size_t at = 0; (at = ln_source.find("coil_column_reduce(acc_", at)) != std::string::npos;
       ++at)
    ++columns;
  EXPECT_EQ(columns, 2u) << ln_source;
  EXPECT_EQ(cuda_compile_errors(ln), "");

  // Rows, and arg reductions.
  Graph rows;
  Node* z = rows.placeholder("z", ops::contiguous_meta(kFloat32, {768, 8192}));
  rows.output(
      {rows.call(OpId::sum, {z, Shape{1}}), rows.call(OpId::argmax, {z, int64_t{0}, false})});
  const std::string row_source = cuda_module_source(rows);
  EXPECT_EQ(row_source.find("coil_column_reduce(acc_"), std::string::npos) << row_source;
  EXPECT_EQ(cuda_compile_errors(rows), "");
}

// A channels-last batch norm's statistics (sum and variance over N, H and W, the channels
// innermost, keepdim's dims of one after them) are read down the columns, cut across their rows
// into pieces enough to fill the GPU, never into runs of a channel's elements a stride apart.
TEST(CudaCodegen, ChannelsLastStatisticsReduceDownColumns) {
  if (!cuda::is_built()) GTEST_SKIP() << "coil was built without CUDA";
  Graph g;
  TensorMeta meta = ops::contiguous_meta(kBFloat16, {32, 64, 112, 112}, Device("cuda"));
  meta.strides = {64 * 112 * 112, 1, 112 * 64, 64};
  Node* x = g.call(OpId::to_dtype, {g.placeholder("x", meta), kFloat32});
  g.output({g.call(OpId::sum, {x, Shape{0, 2, 3}, true}),
            g.call(OpId::var, {x, Shape{0, 2, 3}, 0.0, false})});
  const std::string source = cuda_module_source(g);
  EXPECT_EQ(source.find("coil_block_reduce(acc_"), std::string::npos) << source;
  EXPECT_NE(source.find("coil_column_reduce(acc_"), std::string::npos) << source;
  EXPECT_NE(source.find("for (i64 r = coil_t; r < 256; r += 32)"), std::string::npos) << source;
  EXPECT_EQ(cuda_compile_errors(g), "");
}

// A model's identical layers make one CUDA kernel: three layer norms over the outputs of three
// products are generated three times and compiled once (the module holds one __global__ for
// them), and the module compiles.
TEST(CudaCodegen, IdenticalLayersCompileOnce) {
  if (!cuda::is_built()) GTEST_SKIP() << "coil was built without CUDA";
  Graph g;
  const Device gpu("cuda");
  Node* h = g.placeholder("x", ops::contiguous_meta(kFloat32, {64, 256}, gpu));
  Node* w = g.placeholder("w", ops::contiguous_meta(kFloat32, {256, 256}, gpu));
  Node* gamma = g.placeholder("gamma", ops::contiguous_meta(kFloat32, {256}, gpu));
  for (int layer = 0; layer < 3; ++layer) {
    Node* product = g.call(OpId::mm, {h, w});
    h = g.call(OpId::layer_norm, {product, Shape{256}, gamma, gamma});
  }
  g.output({h});
  const std::string source = cuda_module_source(g);
  size_t kernels = 0;
  for (size_t at = 0; (at = source.find("__global__", at)) != std::string::npos; ++at) ++kernels;
  EXPECT_EQ(kernels, 1u) << source;
  EXPECT_EQ(cuda_compile_errors(g), "");
}

// mode="max-autotune": every kernel with a choice of launch carries the other launches —
// pointwise blocks of 128, 512 and 1024 threads; rows in registers with other groups and rows a
// block; rows a block with other widths, and in registers with ragged runs — as functions of their
// own in the module, which compiles; the wrapper's plan takes them, and the graph cache keeps them.
// The default mode has none.
TEST(CudaCodegen, MaxAutotuneKernelsCarryTheirOtherLaunches) {
  if (!cuda::is_built()) GTEST_SKIP() << "coil was built without CUDA";
  const backends::DeviceBackend* be = backends::cuda_backend(-1);
  Graph g;
  Node* x = g.placeholder("x", ops::contiguous_meta(kFloat32, {4096, 1024}, kCUDA));
  Node* y = g.placeholder("y", ops::contiguous_meta(kFloat32, {512, 3000}, kCUDA));
  Node* z = g.placeholder("z", ops::contiguous_meta(kFloat32, {1 << 20}, kCUDA));
  g.output({g.call(OpId::softmax, {x, int64_t{1}}), g.call(OpId::sin, {z}),
            g.call(OpId::sum, {y, Shape{1}})});
  Graph lowered = g.clone();
  debug::CompileTrace trace("autotune_test", "autotune_test", CompileOptions{}, {});
  stages::graph_stages(lowered, trace);
  ir::Program program = stages::lowering(lowered, *be, trace);
  schedule::Schedule sched = stages::scheduling(program, trace);
  std::vector<codegen::KernelSource> plain = stages::codegen(lowered, program, sched, *be, trace);
  std::vector<codegen::KernelSource> tuned =
      stages::codegen(lowered, program, sched, *be, trace, /*autotune=*/true);
  ASSERT_EQ(tuned.size(), 3u);
  for (const codegen::KernelSource& k : plain) EXPECT_TRUE(k.alternatives.empty()) << k.name;
  std::set<std::string> names;
  for (const codegen::KernelSource& k : tuned) {
    ASSERT_FALSE(k.alternatives.empty()) << k.name;
    // Each launch is another kernel: its code, less its name, differs from every other's.
    auto body = [](const codegen::KernelSource& s) {
      return std::regex_replace(s.code, std::regex(s.name + "\\b"), "K");
    };
    std::set<std::string> bodies = {body(k)};
    for (size_t n = 0; n < k.alternatives.size(); ++n) {
      const codegen::KernelSource& a = k.alternatives[n];
      EXPECT_EQ(a.name, k.name + "_at" + std::to_string(n + 1));
      EXPECT_EQ(a.args, k.args);
      EXPECT_TRUE(bodies.insert(body(a)).second) << a.name << " repeats a launch";
      names.insert(a.name);
    }
  }
  const std::string source = be->module_source(tuned);
  for (const std::string& n : names) EXPECT_NE(source.find(" " + n + "("), std::string::npos) << n;
  // The rows of 3000, a block each by the heuristics, also in registers: 128 threads with six
  // runs of four, the last runs of some threads past the row's end.
  EXPECT_NE(source.find("for (int coil_k = 0; coil_k < 6; ++coil_k) if (((i64)coil_k * 128 + "
                        "coil_t) * 4 < 3000)"),
            std::string::npos)
      << source;
  EXPECT_EQ(cuda_compile_errors(g, /*autotune=*/true), "");
  EXPECT_EQ(be->module_source(plain).find("_at1("), std::string::npos);

  // The plan names each alternative's function, and the graph cache keeps them.
  CachedGraph entry{source, stages::wrapper(program, sched, tuned, trace), {}};
  size_t alternatives = 0;
  for (const auto& step : entry.plan.steps) alternatives += step.alternatives.size();
  EXPECT_EQ(alternatives, names.size());
  const std::string key =
      graph_cache_key(lowered, CompileOptions{.mode = "max-autotune"}) + "_test";
  ASSERT_EQ(store_cached_graph(key, lowered, entry), "");
  std::optional<CachedGraph> back = load_cached_graph(key, lowered);
  ASSERT_TRUE(back.has_value());
  ASSERT_EQ(back->plan.steps.size(), entry.plan.steps.size());
  for (size_t i = 0; i < entry.plan.steps.size(); ++i) {
    const auto &a = entry.plan.steps[i].alternatives, &b = back->plan.steps[i].alternatives;
    ASSERT_EQ(a.size(), b.size());
    for (size_t n = 0; n < a.size(); ++n) {
      EXPECT_EQ(a[n].kernel, b[n].kernel);
      EXPECT_EQ(a[n].launch, b[n].launch);
      EXPECT_EQ(a[n].divisors, b[n].divisors);
    }
  }
  EXPECT_NE(graph_cache_key(lowered, CompileOptions{.mode = "max-autotune"}),
            graph_cache_key(lowered, CompileOptions{}));
}
