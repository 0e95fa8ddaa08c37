// gather, index_select, scatter_add against references written as plain loops.
#include "ops/shape_testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

// Indices in [0, n) of `dtype`, laid out non-contiguously when asked.
Tensor indices(const Shape& sizes, int64_t n, DType dtype = kInt64, bool strided = false) {
  Tensor t = randint(0, n, sizes, kInt64).to(dtype);
  return strided ? noncontiguous(t) : t;
}

}  // namespace

// ---- gather ------------------------------------------------------------------------------------

TEST(Gather, EveryDTypeEveryDim) {
  const Shape self_sizes{3, 4, 5};
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = noncontiguous(sample(self_sizes, dt));
    Values vx(x);
    for (int64_t dim : {0, 1, 2, -1, -3}) {
      SCOPED_TRACE(dim);
      int64_t d = (dim + 3) % 3;
      // Smaller than self outside `dim`, larger along it.
      Shape isz{2, 3, 4};
      isz[d] = 7;
      Tensor index = indices(isz, self_sizes[d], kInt64, /*strided=*/true);
      Values vi(index);
      auto ref = build(isz, [&](const Shape& i) {
        Shape src = i;
        src[d] = static_cast<int64_t>(vi.at(i));
        return vx.at(src);
      });
      expect_exact(gather(x, dim, index), dt, ref, isz);
    }
  }
}

TEST(Gather, Int32IndexZeroDimAndEmpty) {
  Tensor x = sample({4, 3}, kFloat32);
  Values vx(x);
  Tensor idx = tensor<int32_t>({3, 0, 0, 1, 2, 3}, Shape{2, 3});
  Values vi(idx);
  expect_exact(gather(x, 0, idx), kFloat32,
               build({2, 3},
                     [&](const Shape& i) {
                       return vx.at({static_cast<int64_t>(vi.at(i)), i[1]});
                     }),
               {2, 3});
  // A 0-dim self acts as 1-D of one element; the result has the index's shape.
  expect_close(gather(full({}, 5.0), 0, tensor<int64_t>({0, 0, 0})), {5, 5, 5}, {3});
  expect_close(gather(tensor<float>({7, 8}), 0, full({}, int64_t{1})), {8}, {});
  // An empty index skips every check, as torch.
  EXPECT_EQ(gather(x, 1, empty({0, 9}, kInt64)).sizes(), (Shape{0, 9}));
  EXPECT_EQ(gather(x, 1, empty({0}, kFloat32)).sizes(), (Shape{0}));
}

TEST(Gather, LargeIndexThreaded) {
  Tensor x = sample({64, 700}, kFloat64);
  Tensor index = indices({64, 1000}, 700);
  Values vx(x), vi(index);
  expect_exact(gather(x, 1, index), kFloat64,
               build({64, 1000},
                     [&](const Shape& i) {
                       return vx.at({i[0], static_cast<int64_t>(vi.at(i))});
                     }),
               {64, 1000});
}

TEST(Gather, Errors) {
  Tensor x = zeros({3, 4});
  EXPECT_COIL_ERROR(gather(x, 0, zeros({2, 2})), "index must be int64 or int32, got f32[2, 2]");
  EXPECT_COIL_ERROR(gather(x, 0, zeros({2}, kInt64)), "as many dims as self f32[3, 4]");
  EXPECT_COIL_ERROR(gather(x, 0, zeros({2, 5}, kInt64)), "larger than self f32[3, 4] in dim 1");
  EXPECT_COIL_ERROR(gather(x, 2, zeros({2, 2}, kInt64)), "dim 2 is out of range");
  EXPECT_COIL_ERROR(gather(x, 1, tensor<int64_t>({0, 4}, Shape{1, 2})),
                    "gather: index 4 is out of bounds for dim 1 of f32[3, 4] (size 4)");
  EXPECT_COIL_ERROR(gather(x, 0, tensor<int64_t>({-1}, Shape{1, 1})), "index -1 is out of bounds");
}

// ---- index_select ------------------------------------------------------------------------------

TEST(IndexSelect, EveryDTypeBothIndexTypes) {
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = noncontiguous(sample({3, 4, 2}, dt));
    Values vx(x);
    for (DType it : {kInt64, kInt32}) {
      for (int64_t dim : {0, 1, -1}) {
        SCOPED_TRACE(std::string(dtype_name(it)) + " dim " + std::to_string(dim));
        int64_t d = (dim + 3) % 3;
        Tensor index = indices({6}, x.sizes()[d], it, /*strided=*/true);  // repeats likely
        Values vi(index);
        Shape sizes = x.sizes();
        sizes[d] = 6;
        auto ref = build(sizes, [&](const Shape& i) {
          Shape src = i;
          src[d] = static_cast<int64_t>(vi.at({i[d]}));
          return vx.at(src);
        });
        expect_exact(index_select(x, dim, index), dt, ref, sizes);
      }
    }
  }
}

TEST(IndexSelect, ZeroDimAndEmpty) {
  Tensor x = sample({3, 2}, kInt32);
  Values vx(x);
  // A 0-dim index keeps the dim, with size 1.
  expect_exact(index_select(x, 0, full({}, int64_t{2})), kInt32, {vx.at({2, 0}), vx.at({2, 1})},
               {1, 2});
  // A 0-dim self gives a 0-dim result.
  expect_close(index_select(full({}, 4.0), 0, tensor<int64_t>({0})), {4}, {});
  EXPECT_EQ(index_select(x, 1, empty({0}, kInt64)).sizes(), (Shape{3, 0}));
  EXPECT_EQ(index_select(empty({0, 2}), 1, tensor<int64_t>({1, 1, 0})).sizes(), (Shape{0, 3}));
}

TEST(IndexSelect, Errors) {
  Tensor x = zeros({3, 4});
  EXPECT_COIL_ERROR(index_select(x, 0, zeros({2, 1}, kInt64)), "must be 1-D or 0-dim");
  EXPECT_COIL_ERROR(index_select(x, 0, zeros({2}, kUInt8)), "index must be int64 or int32");
  EXPECT_COIL_ERROR(index_select(x, 1, tensor<int64_t>({1, 4})),
                    "index_select: index 4 is out of bounds for dim 1 of f32[3, 4]");
  EXPECT_COIL_ERROR(index_select(x, 0, tensor<int32_t>({-1})), "index -1 is out of bounds");
  // Checked even when the result holds no elements.
  EXPECT_COIL_ERROR(index_select(empty({0, 2}), 1, tensor<int64_t>({2})),
                    "index 2 is out of bounds");
  EXPECT_COIL_ERROR(index_select(full({}, 1.0), 0, tensor<int64_t>({0, 0})),
                    "takes exactly one index");
  EXPECT_COIL_ERROR(index_select(x, -3, tensor<int64_t>({0})), "dim -3 is out of range");
}

// ---- scatter_add -------------------------------------------------------------------------------

namespace {

// self + src scattered along dim, by definition: each index element adds its src value.
std::vector<double> scatter_add_ref(const Tensor& self, int64_t d, const Tensor& index,
                                    const Tensor& src) {
  std::vector<double> out = values(self);
  Values vi(index), vs(src);
  for (int64_t k = 0; k < index.numel(); ++k) {
    Shape i = unravel(k, index.sizes());
    Shape dst = i;
    dst[d] = static_cast<int64_t>(vi.at(i));
    out[static_cast<size_t>(ravel(dst, self.sizes()))] += vs.at(i);
  }
  return out;
}

}  // namespace

TEST(ScatterAdd, DTypesAndDims) {
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kInt8, kUInt8}) {
    SCOPED_TRACE(dtype_name(dt));
    // Small integers keep int8/uint8 sums in range; 16-bit floats round each addition.
    Tensor self = noncontiguous(random({4, 5, 3}, dt, 0, 10));
    for (int64_t dim : {0, 1, -1}) {
      SCOPED_TRACE(dim);
      int64_t d = (dim + 3) % 3;
      Shape isz{3, 4, 2}, ssz{3, 5, 3};
      isz[d] = 6;  // longer than self along dim: duplicate targets
      ssz[d] = 7;
      Tensor index = indices(isz, self.sizes()[d], kInt64, /*strided=*/true);
      Tensor src = noncontiguous(random(ssz, dt, 0, is_floating(dt) ? 2 : 4));
      Tensor before = self.clone();
      Tensor out = scatter_add(self, dim, index, src);
      double tol = is_floating(dt) ? 4 * rtol_for(dt) : 0;
      EXPECT_EQ(out.dtype(), dt);
      expect_close(out, scatter_add_ref(self, d, index, src), self.sizes(), tol, tol);
      expect_close(self, values(before), self.sizes(), 0, 0);  // out of place
    }
  }
}

TEST(ScatterAdd, BoolIsLogicalOrAndInt32Index) {
  Tensor self = tensor<bool>({false, true, false});
  Tensor out = scatter_add(self, 0, tensor<int32_t>({2, 2}), tensor<bool>({true, false}));
  expect_exact(out, kBool, {0, 1, 1}, {3});
}

TEST(ScatterAdd, IntegerOverflowWrapsAsTorch) {
  Tensor idx = tensor<int64_t>({0, 0});
  expect_exact(scatter_add(tensor<int8_t>({120}), 0, idx, tensor<int8_t>({5, 5})), kInt8, {-126},
               {1});
  expect_exact(scatter_add(tensor<uint8_t>({250}), 0, idx, tensor<uint8_t>({5, 5})), kUInt8, {4},
               {1});
  expect_exact(scatter_add(tensor<int32_t>({2147483647}), 0, idx, tensor<int32_t>({1, 0})), kInt32,
               {-2147483648.0}, {1});
}

TEST(ScatterAdd, ZeroDimEmptyAndLarge) {
  expect_close(scatter_add(full({}, 1.0), 0, tensor<int64_t>({0, 0}), tensor<float>({2, 3})), {6},
               {});
  Tensor self = sample({2, 3}, kFloat32);
  Tensor out = scatter_add(self, 1, empty({0}, kFloat32), zeros({5}));
  expect_close(out, values(self), {2, 3}, 0, 0);
  EXPECT_FALSE(out.shares_storage(self));
  // Many rows in parallel, each with many colliding targets: exact in float64 integers.
  Tensor big = random({256, 64}, kFloat64, -8, 8);
  Tensor index = indices({256, 512}, 64);
  Tensor src = random({256, 512}, kFloat64, -8, 8);
  expect_close(scatter_add(big, 1, index, src), scatter_add_ref(big, 1, index, src), {256, 64}, 0,
               0);
  // dim 0 of a 1-D tensor: one line, which must not be split across threads.
  Tensor line = zeros({16}, kFloat64);
  Tensor lidx = indices({200000}, 16);
  Tensor ones_src = ones({200000}, kFloat64);
  expect_close(scatter_add(line, 0, lidx, ones_src), scatter_add_ref(line, 0, lidx, ones_src), {16},
               0, 0);
}

// An embedding's gradient: many tokens scattered into few rows along dim 0, the index one
// column broadcast over the features (stride 0), the features split into blocks across threads
// (a partial last block too); exact in float64 integers. An index out of range inside that
// parallel loop is still a clear error.
TEST(ScatterAdd, ManyTokensIntoRowsOfFeatures) {
  const int64_t vocab = 50, features = 100, tokens = 2000;
  Tensor table = random({vocab, features}, kFloat64, -8, 8);
  Tensor index = indices({tokens, 1}, vocab).expand({tokens, features});
  Tensor grad = random({tokens, features}, kFloat64, -8, 8);
  expect_close(scatter_add(table, 0, index, grad), scatter_add_ref(table, 0, index, grad),
               {vocab, features}, 0, 0);
  Tensor bad = cat({indices({tokens - 1, 1}, vocab), full({1, 1}, vocab, kInt64)}, 0);
  EXPECT_COIL_ERROR(scatter_add(table, 0, bad.expand({tokens, features}), grad),
                    "scatter_add: index 50 is out of bounds for dim 0");
}

TEST(ScatterAdd, Errors) {
  Tensor x = zeros({3, 4});
  Tensor idx = zeros({2, 2}, kInt64);
  EXPECT_COIL_ERROR(scatter_add(x, 0, idx, zeros({2, 2}, kFloat64)),
                    "src f64[2, 2] must have the dtype of self f32[3, 4]");
  EXPECT_COIL_ERROR(scatter_add(x, 0, zeros({2, 2}), zeros({2, 2})),
                    "index must be int64 or int32");
  EXPECT_COIL_ERROR(scatter_add(x, 0, zeros({2}, kInt64), zeros({2, 2})), "same number of dims");
  EXPECT_COIL_ERROR(scatter_add(x, 0, idx, zeros({2, 1})), "no larger than src f32[2, 1]");
  EXPECT_COIL_ERROR(scatter_add(x, 0, zeros({2, 5}, kInt64), zeros({2, 5})), "(dim 1 is not)");
  EXPECT_COIL_ERROR(scatter_add(x, 2, idx, zeros({2, 2})), "dim 2 is out of range");
  EXPECT_COIL_ERROR(scatter_add(x, 1, tensor<int64_t>({0, 4}, Shape{1, 2}), zeros({1, 2})),
                    "scatter_add: index 4 is out of bounds for dim 1 of f32[3, 4] (size 4)");
  EXPECT_COIL_ERROR(scatter_add(x, 0, tensor<int64_t>({-1}, Shape{1, 1}), zeros({1, 1})),
                    "index -1 is out of bounds");
}
