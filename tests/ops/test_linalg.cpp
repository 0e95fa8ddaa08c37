// mm, bmm, addmm, matmul, linear and scaled_dot_product_attention against float64 references
// computed here with plain loops.
#include <omp.h>

#include <array>
#include <cmath>

#include "testing.h"

using namespace coil;
namespace ct = coil::testing;
using coil::testing::noncontiguous;
using coil::testing::random;
using coil::testing::values;

namespace {

struct Ref {
  std::vector<double> v;
  Shape sizes;
};

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Row-major index of `idx` in `sizes`, where a size-1 dim always reads index 0 (broadcast).
int64_t ravel_broadcast(const Shape& idx, const Shape& sizes) {
  int64_t off = 0;
  size_t lead = idx.size() - sizes.size();
  for (size_t d = 0; d < sizes.size(); ++d)
    off = off * sizes[d] + (sizes[d] == 1 ? 0 : idx[lead + d]);
  return off;
}

// torch.matmul's rules, spelled out: 1-D operands gain a dim that is removed again, batch
// dims broadcast, then a triple loop in float64.
Ref ref_matmul(const Tensor& a, const Tensor& b) {
  Shape as = a.sizes(), bs = b.sizes();
  bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  size_t nb = std::max(ab.size(), bb.size());
  Shape batch(nb, 1);
  for (size_t i = 0; i < nb; ++i) {
    int64_t x = i + ab.size() >= nb ? ab[i + ab.size() - nb] : 1;
    int64_t y = i + bb.size() >= nb ? bb[i + bb.size() - nb] : 1;
    batch[i] = x == 1 ? y : x;
  }
  std::vector<double> av = values(a), bv = values(b);
  Ref r;
  r.sizes = batch;
  if (!a_vec) r.sizes.push_back(m);
  if (!b_vec) r.sizes.push_back(n);
  for (int64_t bi = 0; bi < numel(batch); ++bi) {
    Shape idx = ct::unravel(bi, batch);
    int64_t ao = ravel_broadcast(idx, ab) * m * k, bo = ravel_broadcast(idx, bb) * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += av[ao + i * k + p] * bv[bo + p * n + j];
        r.v.push_back(s);
      }
  }
  return r;
}

// Integers test exactly on values that cannot overflow; floats on [-2, 2).
Tensor operand(const Shape& sizes, DType dt) {
  if (dt == kUInt8) return random(sizes, dt, 0, 3);
  if (is_integral(dt)) return random(sizes, dt, -1, 2);
  return random(sizes, dt);
}

// Products of k terms of size up to 4: the absolute error grows with k.
void expect_product(const Tensor& got, const Ref& want, DType dt, int64_t k) {
  double rtol = is_integral(dt) ? 0 : ct::rtol_for(dt);
  double atol = is_integral(dt) ? 0 : rtol * 4 * std::max<int64_t>(k, 1);
  EXPECT_EQ(got.dtype(), dt);
  ct::expect_close(got, want.v, want.sizes, rtol, atol);
}

const std::vector<DType> kAllProductDtypes = {kFloat32, kFloat64, kFloat16, kBFloat16,
                                              kInt64,   kInt32,   kInt8,    kUInt8};

}  // namespace

// ---- mm
// ------------------------------------------------------------------------------------------

TEST(Mm, MatchesReferenceForEveryDtypeAndOddSizes) {
  std::vector<std::array<int64_t, 3>> shapes = {{1, 1, 1},  {3, 17, 33}, {33, 3, 1}, {17, 33, 3},
                                                {1, 17, 1}, {0, 3, 4},   {3, 0, 4},  {3, 4, 0}};
  for (DType dt : kAllProductDtypes) {
    for (auto [m, k, n] : shapes) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + std::to_string(m) + "x" + std::to_string(k) +
                   "x" + std::to_string(n));
      Tensor a = operand({m, k}, dt), b = operand({k, n}, dt);
      expect_product(mm(a, b), ref_matmul(a, b), dt, k);
      expect_product(a.mm(b), ref_matmul(a, b), dt, k);
    }
  }
}

TEST(Mm, StridedOperandsAreReadCorrectly) {
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kInt64}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = operand({5, 17}, dt), b = operand({17, 3}, dt);
    // Transposed layouts (BLAS transpose flags), a column-strided slice (packed), a broadcast
    // row (stride 0, packed) and a transposed view.
    Tensor at = noncontiguous(a), bt = noncontiguous(b);
    Tensor sliced = operand({5, 34}, dt).slice(1, 0, std::nullopt, 2);
    Tensor bcast = operand({1, 17}, dt).expand({5, 17});
    Tensor tview = operand({3, 17}, dt).t();
    expect_product(mm(at, b), ref_matmul(a, b), dt, 17);
    expect_product(mm(a, bt), ref_matmul(a, b), dt, 17);
    expect_product(mm(at, bt), ref_matmul(a, b), dt, 17);
    expect_product(mm(sliced, b), ref_matmul(sliced, b), dt, 17);
    expect_product(mm(bcast, b), ref_matmul(bcast, b), dt, 17);
    expect_product(mm(a, tview), ref_matmul(a, tview), dt, 17);
  }
}

// A single row times a matrix runs as a matrix-vector product (gemv reads the matrix once where
// gemm would pack it): the row contiguous or strided, the matrix row-major or transposed (a
// head over a vocabulary, x @ w.t()), with and without a bias to add, small and large.
TEST(Mm, SingleRowsTimesAMatrix) {
  for (DType dt : {kFloat32, kFloat64}) {
    for (auto [k, n] : {std::pair<int64_t, int64_t>{17, 33}, {300, 2051}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " 1x" + std::to_string(k) + "x" +
                   std::to_string(n));
      Tensor a = operand({1, k}, dt), b = operand({k, n}, dt);
      Tensor strided = operand({1, 2 * k}, dt).slice(1, 0, std::nullopt, 2);
      Tensor w = operand({n, k}, dt), bias = operand({n}, dt);
      expect_product(mm(a, b), ref_matmul(a, b), dt, k);
      expect_product(mm(strided, b), ref_matmul(strided, b), dt, k);
      expect_product(mm(a, w.t()), ref_matmul(a, w.t()), dt, k);
      expect_product(mm(strided, w.t()), ref_matmul(strided, w.t()), dt, k);
      Ref with_bias = ref_matmul(a, w.t());
      std::vector<double> bv = values(bias);
      for (int64_t j = 0; j < n; ++j)
        with_bias.v[static_cast<size_t>(j)] += bv[static_cast<size_t>(j)];
      expect_product(addmm(bias, a, w.t()), with_bias, dt, k + 1);
      expect_product(matmul(a.reshape({k}), w.t()), ref_matmul(a.reshape({k}), w.t()), dt, k);
    }
  }
}

TEST(Mm, IntegerProductsWrapAroundLikeTorch) {
  Tensor a = full({1, 2}, 100, kInt8), b = full({2, 1}, 2, kInt8);
  EXPECT_EQ(mm(a, b).item<int64_t>(), 400 - 512);  // int8 arithmetic, as PyTorch
  Tensor c = full({1, 3}, 200, kUInt8), d = full({3, 1}, 1, kUInt8);
  EXPECT_EQ(mm(c, d).item<int64_t>(), 600 % 256);
}

TEST(Mm, LargeProductsTakeTheParallelPaths) {
  // Big enough for the row-parallel integer loop and the batch-parallel small GEMMs.
  Tensor a = operand({40, 41}, kInt32), b = operand({41, 42}, kInt32);
  expect_product(mm(a, b), ref_matmul(a, b), kInt32, 41);
  for (DType dt : {kFloat32, kFloat16}) {
    Tensor x = operand({8, 33, 33}, dt), y = operand({8, 33, 33}, dt).transpose(1, 2);
    expect_product(bmm(x, y), ref_matmul(x, y), dt, 33);
  }
}

TEST(Mm, Errors) {
  EXPECT_COIL_ERROR(mm(ones({2, 3}), ones({4, 5})),
                    "mm: cannot multiply f32[2, 3] by f32[4, 5]: inner sizes 3 and 4 differ");
  EXPECT_COIL_ERROR(mm(ones({2, 3}), ones({3, 4}, kFloat64)), "same dtype");
  EXPECT_COIL_ERROR(mm(ones({2, 3}, kBool), ones({3, 4}, kBool)), "bool");
  EXPECT_COIL_ERROR(mm(ones({3}), ones({3, 4})), "use matmul");
  EXPECT_COIL_ERROR(mm(ones({2, 2, 3}), ones({3, 4})), "2-D");
}

// ---- bmm, addmm
// ------------------------------------------------------------------------------------

TEST(Bmm, MatchesReference) {
  for (DType dt : kAllProductDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = operand({3, 5, 17}, dt), b = operand({3, 17, 4}, dt);
    expect_product(bmm(a, b), ref_matmul(a, b), dt, 17);
    expect_product(bmm(noncontiguous(a), noncontiguous(b)), ref_matmul(a, b), dt, 17);
    Tensor bt = operand({3, 4, 17}, dt).transpose(1, 2);
    expect_product(bmm(a, bt), ref_matmul(a, bt), dt, 17);
  }
  Tensor one_batch = random({1, 33, 1}), other = random({1, 1, 3});
  expect_product(bmm(one_batch, other), ref_matmul(one_batch, other), kFloat32, 1);
  EXPECT_EQ(bmm(ones({0, 2, 3}), ones({0, 3, 4})).sizes(), (Shape{0, 2, 4}));
  Tensor z = bmm(ones({2, 2, 0}), ones({2, 0, 3}));
  ct::expect_close(z, std::vector<double>(12, 0.0), {2, 2, 3});
}

TEST(Bmm, Errors) {
  EXPECT_COIL_ERROR(bmm(ones({2, 3, 4}), ones({3, 4, 5})), "batch sizes 2 and 3");
  EXPECT_COIL_ERROR(bmm(ones({2, 3, 4}), ones({2, 5, 5})), "inner sizes 4 and 5 differ");
  EXPECT_COIL_ERROR(bmm(ones({3, 4}), ones({4, 5})), "3-D");
  EXPECT_COIL_ERROR(bmm(ones({2, 3, 4}), ones({2, 4, 5}, kInt64)), "same dtype");
}

// A bias of one row ([n], [1, n]) goes to the library with the product (oneDNN adds it in its
// kernel for float32 products of 32768 multiply-adds and more); every other broadcast, and a
// row read through strides, is stored into the result first.
TEST(Addmm, BiasBroadcastsToTheProduct) {
  for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{{3, 17, 5}, {96, 64, 80}}) {
    for (DType dt : {kFloat32, kFloat64, kFloat16, kInt64}) {
      Tensor a = operand({m, k}, dt), b = operand({k, n}, dt);
      Ref prod = ref_matmul(a, b);
      for (Shape bias_shape : std::vector<Shape>{{m, n}, {n}, {1, n}, {m, 1}, {}}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " bias " + shape_str(bias_shape) + " k " +
                     std::to_string(k));
        Tensor bias = operand(bias_shape, dt);
        Tensor expanded = bias.expand({m, n}).contiguous();
        Ref want = prod;
        std::vector<double> bv = values(expanded);
        for (size_t i = 0; i < want.v.size(); ++i) want.v[i] += bv[i];
        expect_product(addmm(bias, a, b), want, dt, k);
        expect_product(addmm(noncontiguous(bias), noncontiguous(a), b), want, dt, k);
      }
    }
  }
  // k = 0: the product is empty and the result is the bias, a row or not.
  for (Shape bias_shape : std::vector<Shape>{{2, 3}, {3}}) {
    Tensor bias = random(bias_shape);
    ct::expect_close(addmm(bias, ones({2, 0}), ones({0, 3})), values(bias.expand({2, 3})), {2, 3});
  }
}

TEST(Addmm, Errors) {
  EXPECT_COIL_ERROR(addmm(ones({3, 3}), ones({2, 4}), ones({4, 2})),
                    "f32[3, 3] cannot broadcast to the product's shape [2, 2]");
  EXPECT_COIL_ERROR(addmm(ones({2}, kFloat64), ones({2, 4}), ones({4, 2})), "same dtype");
  EXPECT_COIL_ERROR(addmm(ones({2}), ones({2, 4}), ones({3, 2})), "inner sizes 4 and 3");
}

// ---- matmul
// ----------------------------------------------------------------------------------------

TEST(Matmul, FollowsTorchRulesForEveryRank) {
  std::vector<std::pair<Shape, Shape>> cases = {
      {{17}, {17}},               // dot -> 0-dim
      {{3, 17}, {17}},            // matrix-vector
      {{17}, {17, 3}},            // vector-matrix
      {{2, 3, 17}, {17}},         // batched matrix-vector
      {{17}, {2, 17, 3}},         // vector-batched matrix
      {{2, 1, 3, 4}, {5, 4, 2}},  // batch broadcasting both ways
      {{3, 4}, {2, 4, 5}},        // matrix times a batch
      {{2, 3, 4}, {4, 5}},        // batch times a matrix (one folded GEMM)
      {{1, 33}, {33, 1}},
      {{0, 3, 4}, {4, 2}},
      {{2, 3, 0}, {0, 2}},
  };
  for (DType dt : kAllProductDtypes) {
    for (auto& [sa, sb] : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(sa) + " @ " + shape_str(sb));
      Tensor a = operand(sa, dt), b = operand(sb, dt);
      int64_t k = sa.back();
      expect_product(matmul(a, b), ref_matmul(a, b), dt, k);
      expect_product(noncontiguous(a).matmul(noncontiguous(b)), ref_matmul(a, b), dt, k);
    }
  }
}

TEST(Matmul, StridedBatchesThatCannotFold) {
  // A permuted batch (rows and batch interleaved in memory) and a transposed matrix.
  Tensor a = random({3, 2, 5}).permute({1, 0, 2}), b = random({2, 5, 4});
  expect_product(matmul(a, b), ref_matmul(a, b), kFloat32, 5);
  Tensor w = random({4, 5}).t();
  expect_product(matmul(a, w), ref_matmul(a, w), kFloat32, 5);
  Tensor bcast = random({1, 3, 5}).expand({4, 3, 5});
  expect_product(matmul(bcast, w), ref_matmul(bcast, w), kFloat32, 5);
}

TEST(Matmul, Errors) {
  EXPECT_COIL_ERROR(matmul(full({}, 2.0), ones({2, 3})), "at least 1-D");
  EXPECT_COIL_ERROR(matmul(ones({2, 3}), ones({4})), "inner sizes 3 and 4 differ");
  EXPECT_COIL_ERROR(matmul(ones({2, 3, 4}), ones({3, 4, 5})),
                    "batch dims [2] of f32[2, 3, 4] and [3] of f32[3, 4, 5]");
  EXPECT_COIL_ERROR(matmul(ones({3}), ones({3}, kFloat64)), "same dtype");
  EXPECT_COIL_ERROR(matmul(ones({3}, kBool), ones({3}, kBool)), "bool");
}

// ---- linear
// ----------------------------------------------------------------------------------------

TEST(Linear, MatchesXTimesWeightTransposedPlusBias) {
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64}) {
    for (Shape xs : std::vector<Shape>{{2, 3, 17}, {5, 17}, {17}, {1, 1, 17}, {0, 17}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " x " + shape_str(xs));
      Tensor x = operand(xs, dt), w = operand({4, 17}, dt), b = operand({4}, dt);
      Ref want = ref_matmul(x, w.t().contiguous());
      expect_product(linear(x, w), want, dt, 17);
      std::vector<double> bv = values(b);
      for (size_t i = 0; i < want.v.size(); ++i) want.v[i] += bv[i % 4];
      expect_product(linear(x, w, b), want, dt, 17);
      expect_product(linear(noncontiguous(x), noncontiguous(w), noncontiguous(b)), want, dt, 17);
    }
  }
}

TEST(Linear, Errors) {
  EXPECT_COIL_ERROR(linear(ones({2, 3}), ones({4, 5})), "has 3 features but the weight");
  EXPECT_COIL_ERROR(linear(ones({2, 3}), ones({3})), "weight must be 2-D");
  EXPECT_COIL_ERROR(linear(ones({2, 3}), ones({4, 3}), ones({5})), "cannot broadcast");
  EXPECT_COIL_ERROR(linear(ones({2, 3}), ones({4, 3}, kFloat64)), "same dtype");
  EXPECT_COIL_ERROR(linear(ones({2, 3}), ones({4, 3}), ones({4}, kFloat64)), "same dtype");
  EXPECT_COIL_ERROR(linear(full({}, 1.0), ones({4, 3})), "at least 1-D");
}

// ---- scaled_dot_product_attention
// --------------------------------------------------------------------

namespace {

// The math definition in float64: softmax(q k^T * scale + mask) @ v over broadcast batches,
// a row with every key masked giving zeros (PyTorch's _safe_softmax). mask_at(b, l, s) returns
// the additive mask value (-inf to exclude).
template <typename MaskAt>
Ref ref_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, MaskAt mask_at) {
  int64_t L = q.size(-2), E = q.size(-1), S = k.size(-2), Ev = v.size(-1);
  Shape qb(q.sizes().begin(), q.sizes().end() - 2), kb(k.sizes().begin(), k.sizes().end() - 2),
      vb(v.sizes().begin(), v.sizes().end() - 2);
  Shape batch = qb;  // the tests broadcast k and v against q's batch
  std::vector<double> qv = values(q), kv = values(k), vv = values(v);
  Ref r;
  r.sizes = batch;
  r.sizes.push_back(L);
  r.sizes.push_back(Ev);
  for (int64_t bi = 0; bi < numel(batch); ++bi) {
    Shape idx = ct::unravel(bi, batch);
    int64_t qo = ravel_broadcast(idx, qb) * L * E, ko = ravel_broadcast(idx, kb) * S * E,
            vo = ravel_broadcast(idx, vb) * S * Ev;
    for (int64_t l = 0; l < L; ++l) {
      std::vector<double> w(S);
      double mx = -INFINITY;
      for (int64_t s = 0; s < S; ++s) {
        double dot = 0;
        for (int64_t e = 0; e < E; ++e) dot += qv[qo + l * E + e] * kv[ko + s * E + e];
        w[s] = dot * scale + mask_at(bi, l, s);
        mx = std::max(mx, w[s]);
      }
      double sum = 0;
      for (double& x : w) sum += (x = mx == -INFINITY ? 0 : std::exp(x - mx));
      for (int64_t j = 0; j < Ev; ++j) {
        double o = 0;
        for (int64_t s = 0; s < S; ++s)
          if (sum > 0) o += w[s] / sum * vv[vo + s * Ev + j];
        r.v.push_back(o);
      }
    }
  }
  return r;
}

auto no_mask = [](int64_t, int64_t, int64_t) { return 0.0; };

double atol_attention(DType dt) { return dt == kFloat64 ? 1e-12 : ct::rtol_for(dt) * 8; }

}  // namespace

TEST(Attention, MatchesReferenceWithoutMask) {
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor q = random({2, 3, 5, 8}, dt), k = random({2, 3, 7, 8}, dt), v = random({2, 3, 7, 6}, dt);
    Ref want = ref_attention(q, k, v, 1 / std::sqrt(8.0), no_mask);
    Tensor got = scaled_dot_product_attention(q, k, v);
    EXPECT_EQ(got.dtype(), dt);
    ct::expect_close(got, want.v, want.sizes, ct::rtol_for(dt), atol_attention(dt));
    got = scaled_dot_product_attention(noncontiguous(q), noncontiguous(k), noncontiguous(v));
    ct::expect_close(got, want.v, want.sizes, ct::rtol_for(dt), atol_attention(dt));
  }
}

TEST(Attention, LongSequencesTakeTheParallelPath) {
  Tensor q = random({4, 64, 16}), k = random({4, 128, 16}), v = random({4, 128, 8});
  Ref want = ref_attention(q, k, v, 0.25,
                           [](int64_t, int64_t l, int64_t s) { return s > l ? -INFINITY : 0.0; });
  ct::expect_close(scaled_dot_product_attention(q, k, v, {}, 0.0, true), want.v, want.sizes, 1e-5,
                   1e-6);
}

TEST(Attention, ExplicitScaleAndBroadcastBatches) {
  // Grouped-style sharing: one key/value batch serves every query head; 2-D operands too.
  Tensor q = random({2, 3, 4, 5}), k = random({1, 1, 6, 5}), v = random({3, 6, 2});
  Ref want = ref_attention(q, k, v, 0.3, no_mask);
  ct::expect_close(scaled_dot_product_attention(q, k, v, {}, 0.0, false, 0.3), want.v, want.sizes,
                   1e-5, 1e-6);
  Tensor q2 = random({1, 4}), k2 = random({1, 4}), v2 = random({1, 3});
  Ref want2 = ref_attention(q2, k2, v2, 0.5, no_mask);
  ct::expect_close(scaled_dot_product_attention(q2, k2, v2), want2.v, want2.sizes, 1e-5, 1e-6);
}

TEST(Attention, CausalIsTopLeftLowerTriangular) {
  for (auto [L, S] : std::vector<std::pair<int64_t, int64_t>>{{5, 5}, {3, 6}, {6, 3}}) {
    SCOPED_TRACE(std::to_string(L) + "x" + std::to_string(S));
    Tensor q = random({2, L, 4}), k = random({2, S, 4}), v = random({2, S, 3});
    Ref want = ref_attention(q, k, v, 0.5,
                             [](int64_t, int64_t l, int64_t s) { return s > l ? -INFINITY : 0.0; });
    ct::expect_close(scaled_dot_product_attention(q, k, v, {}, 0.0, true), want.v, want.sizes, 1e-5,
                     1e-6);
  }
}

TEST(Attention, BlocksOfQueryRowsCoverEveryRow) {
  // More query rows than one block, a ragged last block, keys not a multiple of the vector
  // width; causal with more queries than keys; operands read through strides.
  for (DType dt : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor q = random({3, 300, 16}, dt), k = random({3, 77, 16}, dt), v = random({3, 77, 24}, dt);
    Ref want = ref_attention(q, k, v, 0.25, no_mask);
    ct::expect_close(
        scaled_dot_product_attention(noncontiguous(q), k, noncontiguous(v), {}, 0.0, false, 0.25),
        want.v, want.sizes, 1e-5, 1e-6);
    Ref causal = ref_attention(
        q, k, v, 0.25, [](int64_t, int64_t l, int64_t s) { return s > l ? -INFINITY : 0.0; });
    ct::expect_close(scaled_dot_product_attention(q, noncontiguous(k), v, {}, 0.0, true, 0.25),
                     causal.v, causal.sizes, 1e-5, 1e-6);
  }
}

// float32 attention runs flash-style where the CPU has AVX-512, a block of query rows per task
// (attention_by_row_blocks, runtime/kernels/attention_block.cpp): at 8 and 16 threads these
// shapes take it with blocks of 128 and 32 rows, a ragged last block, keys shared across the
// batch and keys stored transposed; values without a unit column stride take the batched path.
TEST(Attention, RowBlocksAtManyThreads) {
  const int before = omp_get_max_threads();
  Tensor q = random({3, 300, 16}), k = random({3, 77, 16}), v = random({3, 77, 24});
  Tensor k1 = random({1, 77, 16}), k_t = k.transpose(1, 2).contiguous().transpose(1, 2);
  Ref want = ref_attention(q, k, v, 0.25, no_mask);
  Ref causal = ref_attention(q, k, v, 0.25,
                             [](int64_t, int64_t l, int64_t s) { return s > l ? -INFINITY : 0.0; });
  Ref shared = ref_attention(q, k1, v, 0.25, no_mask);
  for (int threads : {8, 16}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    omp_set_num_threads(threads);
    ct::expect_close(
        scaled_dot_product_attention(noncontiguous(q), k, noncontiguous(v), {}, 0.0, false, 0.25),
        want.v, want.sizes, 1e-5, 1e-6);
    ct::expect_close(scaled_dot_product_attention(q, k_t, v, {}, 0.0, true, 0.25), causal.v,
                     causal.sizes, 1e-5, 1e-6);
    ct::expect_close(scaled_dot_product_attention(q, k1, v, {}, 0.0, false, 0.25), shared.v,
                     shared.sizes, 1e-5, 1e-6);
  }
  omp_set_num_threads(before);
}

// The flash-style kernel's tiles: queries in tiles of 32 (a ragged last one), keys in tiles of
// 12 and 4 and single keys and in the second product's chunks of 64, output columns in groups of 64
// with a partial last vector (every count of vectors, and a second group), output rows in tiles of
// 6, 8 or 12 and single rows; an odd feature count; causal blocks that start past row 0; scores
// wide enough (deviation about 30) that most weights fall below e^-87 and are flushed to 0.
TEST(Attention, FlashBlocksOfEveryTileShapeMatchFloat64) {
  const int before = omp_get_max_threads();
  auto causal_mask = [](int64_t, int64_t l, int64_t s) { return s > l ? -INFINITY : 0.0; };
  for (int threads : {1, 3}) {
    omp_set_num_threads(threads);
    for (int64_t ev : {1, 5, 16, 33, 48, 72, 130}) {
      const int64_t s = ev % 2 ? 37 : 150;  // one chunk of keys, or three with a short last
      SCOPED_TRACE(std::to_string(threads) + " threads, ev " + std::to_string(ev));
      Tensor q = random({2, 45, 21}), k = random({2, s, 21}), v = random({2, s, ev});
      Ref want = ref_attention(q, k, v, 0.3, no_mask);
      ct::expect_close(scaled_dot_product_attention(q, k, v, {}, 0.0, false, 0.3), want.v,
                       want.sizes, 1e-5, 1e-6);
      Ref causal = ref_attention(q, k, v, 0.3, causal_mask);
      ct::expect_close(scaled_dot_product_attention(noncontiguous(q), k, v, {}, 0.0, true, 0.3),
                       causal.v, causal.sizes, 1e-5, 1e-6);
    }
    SCOPED_TRACE(std::to_string(threads) + " threads, long rows and wide scores");
    Tensor q = random({2, 300, 16}, kFloat32, -4, 4), k = random({2, 200, 16}, kFloat32, -4, 4),
           v = random({2, 200, 64});
    Ref want = ref_attention(q, k, v, 1.0, causal_mask);
    // Scores reach 256, where float32's spacing is 3e-5: half of it carries into the weights and
    // so into outputs of unit scale.
    ct::expect_close(scaled_dot_product_attention(q, k, v, {}, 0.0, true, 1.0), want.v, want.sizes,
                     1e-4, 3e-5);
  }
  omp_set_num_threads(before);
}

// bfloat16 and float16 take the same kernel, their elements widened as they are loaded (queries
// packed by rows or, through strides, element by element; keys by rows or columns; values by
// chunks) and each output rounded once: the result is the float32 kernel's on the widened
// operands, rounded, bit for bit, and within the dtype's tolerance of float64.
TEST(Attention, SixteenBitBlocksAreTheFloat32KernelRoundedOnce) {
  const int before = omp_get_max_threads();
  auto causal_mask = [](int64_t, int64_t l, int64_t s) { return s > l ? -INFINITY : 0.0; };
  for (DType dt : {kBFloat16, kFloat16})
    for (int threads : {1, 3}) {
      omp_set_num_threads(threads);
      for (int64_t ev : {5, 33, 64, 130}) {
        const int64_t s = ev % 2 ? 37 : 150;
        SCOPED_TRACE(std::string(dtype_name(dt)) + ", " + std::to_string(threads) +
                     " threads, ev " + std::to_string(ev));
        Tensor q = random({2, 45, 21}, dt), k = random({2, s, 21}, dt), v = random({2, s, ev}, dt);
        Tensor k_t = k.transpose(1, 2).contiguous().transpose(1, 2);
        for (bool causal : {false, true}) {
          Tensor got = scaled_dot_product_attention(causal ? noncontiguous(q) : q, causal ? k_t : k,
                                                    v, {}, 0.0, causal, 0.3);
          ASSERT_EQ(got.dtype(), dt);
          Tensor wide = scaled_dot_product_attention(q.to(kFloat32), k.to(kFloat32), v.to(kFloat32),
                                                     {}, 0.0, causal, 0.3);
          EXPECT_EQ(values(got), values(wide.to(dt))) << (causal ? "causal" : "no mask");
          Ref want = causal ? ref_attention(q, k, v, 0.3, causal_mask)
                            : ref_attention(q, k, v, 0.3, no_mask);
          ct::expect_close(got, want.v, want.sizes, ct::rtol_for(dt), atol_attention(dt));
        }
      }
    }
  omp_set_num_threads(before);
}

TEST(Attention, ScoresOfInfinityAndNaN) {
  // Query row 0 scores -inf against every key (+inf times negative keys): it attends to
  // nothing and gives zeros, as the safe softmax does; a NaN in row 1 makes that row NaN; row 2
  // is ordinary. Rows shorter than a vector and longer than two.
  for (int64_t S : {5, 40}) {
    Tensor q = random({3, 4}), k = random({S, 4}, kFloat32, -2, -0.5), v = random({S, 3});
    q.select(0, 0).select(0, 0).fill_(INFINITY);
    q.select(0, 0).narrow(0, 1, 3).fill_(0.0);
    q.select(0, 1).select(0, 2).fill_(NAN);
    std::vector<double> got = values(scaled_dot_product_attention(q, k, v));
    for (int j = 0; j < 3; ++j) {
      EXPECT_EQ(got[j], 0.0);
      EXPECT_TRUE(std::isnan(got[3 + j]));
    }
    Ref want = ref_attention(q.narrow(0, 2, 1), k, v, 0.5, no_mask);
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(got[6 + j], want.v[j], 1e-6);
  }
}

TEST(Attention, BoolAndFloatMasks) {
  Tensor q = random({2, 3, 4, 5}), k = random({2, 3, 6, 5}), v = random({2, 3, 6, 2});
  double scale = 1 / std::sqrt(5.0);
  // A bool mask (L, S) broadcast over the batch, with row 1 fully masked out: zeros there.
  Tensor bmask = random({4, 6}) > 0.0;
  bmask.select(0, 1).fill_(false);
  std::vector<double> bm = values(bmask);
  Ref want = ref_attention(q, k, v, scale, [&](int64_t, int64_t l, int64_t s) {
    return bm[l * 6 + s] != 0 ? 0.0 : -INFINITY;
  });
  ct::expect_close(scaled_dot_product_attention(q, k, v, bmask), want.v, want.sizes, 1e-5, 1e-6);
  ct::expect_close(scaled_dot_product_attention(q, k, v, noncontiguous(bmask)), want.v, want.sizes,
                   1e-5, 1e-6);
  // An additive float mask (B, 1, L, S) broadcast over heads.
  Tensor fmask = random({2, 1, 4, 6});
  std::vector<double> fm = values(fmask);
  Ref want_f = ref_attention(q, k, v, scale, [&](int64_t b, int64_t l, int64_t s) {
    return fm[((b / 3) * 4 + l) * 6 + s];
  });
  ct::expect_close(scaled_dot_product_attention(q, k, v, fmask), want_f.v, want_f.sizes, 1e-5,
                   1e-6);
  // A float32 mask with float64 inputs, as torch allows.
  Tensor q64 = q.to(kFloat64), k64 = k.to(kFloat64), v64 = v.to(kFloat64);
  ct::expect_close(scaled_dot_product_attention(q64, k64, v64, fmask), want_f.v, want_f.sizes, 1e-6,
                   1e-6);
}

TEST(Attention, DropoutIsSeededAndScalesKeptWeights) {
  // Uniform weights (q = 0) over S keys and v = 1: each output is 2 * (kept keys) / S.
  int64_t S = 50;
  Tensor q = zeros({64, 4}), k = random({S, 4}), v = ones({S, 1});
  manual_seed(7);
  Tensor a = scaled_dot_product_attention(q, k, v, {}, 0.5);
  manual_seed(7);
  Tensor b = scaled_dot_product_attention(q, k, v, {}, 0.5);
  EXPECT_EQ(values(a), values(b));
  double mean = 0;
  for (double x : values(a)) {
    double kept = x * S / 2;
    EXPECT_NEAR(kept, std::round(kept), 1e-3);
    mean += x / 64;
  }
  EXPECT_NEAR(mean, 1.0, 0.1);
  ct::expect_close(scaled_dot_product_attention(q, k, v, {}, 1.0), std::vector<double>(64, 0.0),
                   {64, 1});
}

TEST(Attention, Errors) {
  Tensor q = ones({2, 3, 4}), k = ones({2, 5, 4}), v = ones({2, 5, 6});
  EXPECT_COIL_ERROR(scaled_dot_product_attention(q, k, v, ones({3, 5}, kBool), 0.0, true),
                    "cannot be combined with is_causal");
  EXPECT_COIL_ERROR(scaled_dot_product_attention(q, k, v, ones({3, 5}, kInt64)),
                    "attn_mask must be bool");
  EXPECT_COIL_ERROR(scaled_dot_product_attention(q, k, v, ones({4, 5}, kBool)),
                    "cannot broadcast to the attention scores' shape [2, 3, 5]");
  EXPECT_COIL_ERROR(scaled_dot_product_attention(q, ones({2, 5, 3}), v), "last (embedding)");
  EXPECT_COIL_ERROR(scaled_dot_product_attention(q, k, ones({2, 4, 6})), "sequence length");
  EXPECT_COIL_ERROR(scaled_dot_product_attention(ones({4}), ones({4}), ones({4})), "2-D");
  EXPECT_COIL_ERROR(scaled_dot_product_attention(q, k.to(kFloat64), v), "same dtype");
  EXPECT_COIL_ERROR(scaled_dot_product_attention(q.to(kInt64), k.to(kInt64), v.to(kInt64)),
                    "floating-point");
  EXPECT_COIL_ERROR(scaled_dot_product_attention(q, k, v, {}, 1.5), "dropout_p");
  EXPECT_COIL_ERROR(scaled_dot_product_attention(ones({2, 3, 4}), ones({3, 5, 4}), ones({3, 5, 6})),
                    "cannot be broadcast");
}
