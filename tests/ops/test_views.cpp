// View ops (src/ops/view.cpp): geometry, values read through the view against the base's values,
// storage sharing (writes through a view land in the base) and every error path.
#include <algorithm>

#include "graph/registry.h"
#include "ops/shape_testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

// 0, 1, 2, ... as float64: a value names its position in the base.
Tensor iota(const Shape& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return arange(0, n, 1, kFloat64).view(sizes);
}

void expect_view_of(const Tensor& v, const Tensor& base) { EXPECT_TRUE(v.shares_storage(base)); }

}  // namespace

// ---- view, reshape
// -------------------------------------------------------------------------------

TEST(View, InfersMinusOneEveryDType) {
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = sample({4, 6}, dt);
    Tensor v = x.view({3, -1, 2});
    EXPECT_EQ(v.sizes(), (Shape{3, 4, 2}));
    EXPECT_EQ(v.strides(), (Shape{8, 2, 1}));
    expect_view_of(v, x);
    expect_exact(v, dt, values(x), {3, 4, 2});
    // A write through the view is a write to the base.
    v.select(1, 2).fill_(0);
    Values vx(x);
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t c = 0; c < 2; ++c) EXPECT_EQ(vx.v[static_cast<size_t>(r * 8 + 4 + c)], 0);
  }
}

TEST(View, RegroupsNonContiguousWhereTorchCan) {
  Tensor x = iota({4, 6}).t();   // [6, 4] strides [1, 6]
  Tensor v = x.view({6, 2, 2});  // splits the stride-6 dim: allowed
  EXPECT_EQ(v.strides(), (Shape{1, 12, 6}));
  expect_view_of(v, x);
  Values vx(x);
  expect_close(v,
               build({6, 2, 2},
                     [&](const Shape& i) {
                       return vx.at({i[0], i[1] * 2 + i[2]});
                     }),
               {6, 2, 2}, 0, 0);
  // Size-1 dims and empty tensors view freely; a 0-dim tensor views as any all-ones shape.
  EXPECT_EQ(iota({3, 1, 2}).slice(2, 0, 1).view({3}).strides(), (Shape{2}));
  EXPECT_EQ(empty({0, 3}).view({3, 0, 1}).sizes(), (Shape{3, 0, 1}));
  expect_close(full({}, 2.0).view({1, 1}), {2}, {1, 1});
  expect_close(full({1}, 2.0).view({}), {2}, {});
}

TEST(View, Errors) {
  Tensor x = zeros({2, 3});
  EXPECT_COIL_ERROR(x.t().view({-1}), "use .reshape(...) instead");
  EXPECT_COIL_ERROR(x.view({-1, -1}), "only one dimension can be -1");
  EXPECT_COIL_ERROR(x.view({5}), "shape [5] is invalid for an input of 6 elements");
  EXPECT_COIL_ERROR(x.view({-1, 4}), "shape [-1, 4] is invalid for an input of 6 elements");
  EXPECT_COIL_ERROR(x.view({-2, 3}), "invalid size -2");
  EXPECT_COIL_ERROR(empty({0, 3}).view({-1, 0}), "is invalid for an input of 0 elements");
}

TEST(Reshape, ViewsWhenItCanCopiesWhenItMust) {
  Tensor x = iota({2, 3, 4});
  Tensor v = x.reshape({4, -1});
  expect_view_of(v, x);
  expect_close(v, values(x), {4, 6}, 0, 0);
  v.select(0, 0).fill_(-1);  // visible in the base
  EXPECT_EQ(values(x)[0], -1);

  Tensor t = iota({2, 3, 4}).transpose(0, 2);  // [4, 3, 2], not viewable as [24]
  Tensor c = t.reshape({-1});
  EXPECT_FALSE(c.shares_storage(t));
  EXPECT_TRUE(c.is_contiguous());
  expect_close(c, values(t), {24}, 0, 0);
  c.fill_(7);  // a copy: the input is untouched
  EXPECT_NE(values(t)[1], 7);

  Tensor kept = t.reshape({4, 3, 1, 2});  // only inserts a size-1 dim: still a view
  expect_view_of(kept, t);
  expect_close(kept, values(t), {4, 3, 1, 2}, 0, 0);
  EXPECT_COIL_ERROR(x.reshape({7, -1}), "reshape: shape [7, -1] is invalid for an input of 24");
}

// ---- permute, transpose, t
// -----------------------------------------------------------------------

TEST(Permute, ValuesStridesAndErrors) {
  Tensor x = iota({2, 3, 4});
  Tensor p = x.permute({2, -3, 1});
  EXPECT_EQ(p.sizes(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Shape{1, 12, 4}));
  expect_view_of(p, x);
  Values vx(x);
  expect_close(p,
               build({4, 2, 3},
                     [&](const Shape& i) {
                       return vx.at({i[1], i[2], i[0]});
                     }),
               {4, 2, 3}, 0, 0);
  EXPECT_EQ(full({}, 1.0).permute({}).dim(), 0);
  EXPECT_COIL_ERROR(x.permute({0, 1}), "permute: got 2 dims [0, 1] for f64[2, 3, 4]");
  EXPECT_COIL_ERROR(x.permute({0, 1, -2}), "dim -2 repeats in [0, 1, -2]");
  EXPECT_COIL_ERROR(x.permute({0, 1, 3}), "dim 3 is out of range");
}

TEST(Transpose, ValuesAndErrors) {
  Tensor x = iota({2, 3, 4});
  Tensor tr = x.transpose(-1, 0);
  EXPECT_EQ(tr.sizes(), (Shape{4, 3, 2}));
  Values vx(x);
  expect_close(tr,
               build({4, 3, 2},
                     [&](const Shape& i) {
                       return vx.at({i[2], i[1], i[0]});
                     }),
               {4, 3, 2}, 0, 0);
  expect_view_of(tr, x);
  EXPECT_EQ(x.transpose(1, 1).strides(), x.strides());
  EXPECT_EQ(full({}, 1.0).transpose(0, -1).dim(), 0);
  EXPECT_COIL_ERROR(x.transpose(0, 3), "dim 3 is out of range");
  EXPECT_COIL_ERROR(full({}, 1.0).transpose(0, 1), "dim 1 is out of range");
}

TEST(T, MatricesVectorsScalars) {
  Tensor m = iota({2, 3});
  Tensor mt = m.t();
  EXPECT_EQ(mt.sizes(), (Shape{3, 2}));
  EXPECT_EQ(mt.strides(), (Shape{1, 3}));
  expect_close(mt, {0, 3, 1, 4, 2, 5}, {3, 2}, 0, 0);
  Tensor v = iota({3});
  EXPECT_EQ(v.t().sizes(), (Shape{3}));
  expect_view_of(v.t(), v);
  EXPECT_EQ(full({}, 1.0).t().dim(), 0);
  EXPECT_COIL_ERROR(iota({2, 2, 2}).t(),
                    "t: expects a tensor with at most 2 dims, got f64[2, 2, 2]");
}

// ---- expand
// --------------------------------------------------------------------------------------

TEST(Expand, StrideZeroAndSharedWrites) {
  Tensor x = iota({3, 1});
  Tensor e = x.expand({2, -1, 4});
  EXPECT_EQ(e.sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(e.strides(), (Shape{0, 1, 0}));
  expect_view_of(e, x);
  expect_close(e, build({2, 3, 4}, [](const Shape& i) { return double(i[1]); }), {2, 3, 4}, 0, 0);
  x.fill_(5);  // every expanded position reads the one base element
  expect_close(e, std::vector<double>(24, 5), {2, 3, 4}, 0, 0);
  EXPECT_EQ(x.expand({3, 0}).sizes(), (Shape{3, 0}));
  EXPECT_EQ(x.expand({0, 3, 1}).sizes(), (Shape{0, 3, 1}));
  EXPECT_EQ(full({}, 1.0).expand({2, 2}).strides(), (Shape{0, 0}));
  // A size-1 dim kept at size 1 keeps its stride.
  EXPECT_EQ(iota({1, 3}).expand({1, 3}).strides(), (Shape{3, 1}));
}

TEST(Expand, Errors) {
  Tensor x = zeros({3, 1});
  EXPECT_COIL_ERROR(x.expand({4, 2}), "cannot expand f32[3, 1] to [4, 2] (dim 0: 3 -> 4)");
  EXPECT_COIL_ERROR(x.expand({3}), "has fewer dims than f32[3, 1]");
  EXPECT_COIL_ERROR(x.expand({-1, 3, 1}), "a new leading dim cannot be -1");
}

// Disabled: view.cpp's meta_expand accepts a negative target other than -1 for a size-1 dim
// (expand(ones({1}), {-2}) returns a view of size -2); torch raises. Enable once fixed.
TEST(Expand, RejectsNegativeTargetSizes) { EXPECT_COIL_ERROR(ones({1}).expand({-2}), "expand"); }

// ---- squeeze, unsqueeze
// --------------------------------------------------------------------------

TEST(Squeeze, AllOrOneDim) {
  Tensor x = iota({1, 3, 1, 2});
  Tensor s = x.squeeze();
  EXPECT_EQ(s.sizes(), (Shape{3, 2}));
  EXPECT_EQ(s.strides(), (Shape{2, 1}));
  expect_view_of(s, x);
  EXPECT_EQ(x.squeeze(-2).sizes(), (Shape{1, 3, 2}));
  EXPECT_EQ(x.squeeze(1).sizes(), (Shape{1, 3, 1, 2}));  // not size 1: unchanged
  EXPECT_EQ(full({}, 1.0).squeeze(0).dim(), 0);
  EXPECT_EQ(full({}, 1.0).squeeze().dim(), 0);
  EXPECT_EQ(iota({1, 1}).squeeze().dim(), 0);
  EXPECT_EQ(empty({0, 1}).squeeze().sizes(), (Shape{0}));
  EXPECT_COIL_ERROR(x.squeeze(4), "dim 4 is out of range");
  EXPECT_COIL_ERROR(full({}, 1.0).squeeze(1), "dim 1 is out of range");
}

TEST(Unsqueeze, EveryPositionAndErrors) {
  Tensor x = iota({2, 3});
  EXPECT_EQ(x.unsqueeze(0).sizes(), (Shape{1, 2, 3}));
  EXPECT_EQ(x.unsqueeze(0).strides(), (Shape{6, 3, 1}));
  EXPECT_EQ(x.unsqueeze(1).strides(), (Shape{3, 3, 1}));
  EXPECT_EQ(x.unsqueeze(-1).sizes(), (Shape{2, 3, 1}));
  EXPECT_EQ(x.unsqueeze(-1).strides(), (Shape{3, 1, 1}));
  EXPECT_EQ(full({}, 1.0).unsqueeze(-1).sizes(), (Shape{1}));
  expect_close(x.t().unsqueeze(1), {0, 3, 1, 4, 2, 5}, {3, 1, 2}, 0, 0);
  expect_view_of(x.unsqueeze(2), x);
  EXPECT_COIL_ERROR(x.unsqueeze(3), "dim 3 is out of range");
  EXPECT_COIL_ERROR(x.unsqueeze(-4), "dim -4 is out of range");
}

// ---- slice, narrow, select
// -----------------------------------------------------------------------

TEST(Slice, BoundsWrapClampAndStep) {
  Tensor x = iota({10});
  auto expect_slice = [&](std::optional<int64_t> s, std::optional<int64_t> e, int64_t step) {
    int64_t start = s ? *s : 0, end = e ? *e : 10;  // Python's slice semantics, by hand
    if (start < 0) start += 10;
    if (end < 0) end += 10;
    start = std::clamp<int64_t>(start, 0, 10);
    end = std::clamp<int64_t>(end, 0, 10);
    std::vector<double> ref;
    for (int64_t i = start; i < end; i += step) ref.push_back(double(i));
    Tensor v = x.slice(0, s, e, step);
    expect_close(v, ref, {static_cast<int64_t>(ref.size())}, 0, 0);
    expect_view_of(v, x);
  };
  expect_slice(2, 7, 1);
  expect_slice(-3, std::nullopt, 1);
  expect_slice(std::nullopt, -8, 1);
  expect_slice(-100, 100, 3);
  expect_slice(1, std::nullopt, 4);
  expect_slice(7, 2, 1);  // empty
  expect_slice(12, 20, 2);
  expect_slice(std::nullopt, std::nullopt, 20);
}

TEST(Slice, MultiDimWritesAndErrors) {
  Tensor x = iota({4, 6});
  Tensor v = x.slice(-1, 1, std::nullopt, 2);  // columns 1, 3, 5
  EXPECT_EQ(v.sizes(), (Shape{4, 3}));
  EXPECT_EQ(v.strides(), (Shape{6, 2}));
  EXPECT_EQ(v.storage_offset(), 1);
  v.fill_(-1);
  Values vx(x);
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 6; ++c) EXPECT_EQ(vx.at({r, c}), c % 2 ? -1 : double(r * 6 + c));
  EXPECT_EQ(empty({0, 2}).slice(0, 1, 3).sizes(), (Shape{0, 2}));
  EXPECT_COIL_ERROR(x.slice(0, 0, 2, 0), "step must be positive, got 0");
  EXPECT_COIL_ERROR(x.slice(0, 0, 2, -1), "step must be positive, got -1");
  EXPECT_COIL_ERROR(full({}, 1.0).slice(0, 0, 1), "cannot slice a 0-dim tensor");
  EXPECT_COIL_ERROR(x.slice(2, 0, 1), "dim 2 is out of range");
}

TEST(Narrow, NegativeStartAndErrors) {
  Tensor x = iota({3, 5});
  Tensor n = x.narrow(1, -3, 2);  // columns 2, 3
  expect_close(n, {2, 3, 7, 8, 12, 13}, {3, 2}, 0, 0);
  expect_view_of(n, x);
  EXPECT_EQ(x.narrow(0, 3, 0).sizes(), (Shape{0, 5}));
  EXPECT_COIL_ERROR(x.narrow(1, 4, 2), "start 4 and length 2 are out of range for dim 1");
  EXPECT_COIL_ERROR(x.narrow(1, 0, -1), "length -1 are out of range");
  EXPECT_COIL_ERROR(x.narrow(1, -6, 1), "start -6 and length 1");
  EXPECT_COIL_ERROR(full({}, 1.0).narrow(0, 0, 1), "cannot narrow a 0-dim tensor");
}

TEST(Select, NegativeIndexAndErrors) {
  Tensor x = iota({3, 4});
  Tensor row = x.select(0, -1);
  expect_close(row, {8, 9, 10, 11}, {4}, 0, 0);
  EXPECT_EQ(row.storage_offset(), 8);
  Tensor col = x.select(-1, 1);
  expect_close(col, {1, 5, 9}, {3}, 0, 0);
  col.fill_(0);
  EXPECT_EQ(values(x)[5], 0);
  expect_close(x[1][2], {6}, {}, 0, 0);
  EXPECT_COIL_ERROR(x.select(0, 3), "index 3 is out of range for dim 0 of f64[3, 4] (size 3)");
  EXPECT_COIL_ERROR(x.select(1, -5), "index -5 is out of range");
  EXPECT_COIL_ERROR(full({}, 1.0).select(0, 0), "cannot select from a 0-dim tensor");
  EXPECT_COIL_ERROR(empty({0}).select(0, 0), "index 0 is out of range");
}

// ---- flatten, unflatten
// --------------------------------------------------------------------------

TEST(Flatten, RangesViewsAndCopies) {
  Tensor x = iota({2, 3, 4, 5});
  EXPECT_EQ(x.flatten().sizes(), (Shape{120}));
  EXPECT_EQ(x.flatten(1, 2).sizes(), (Shape{2, 12, 5}));
  EXPECT_EQ(x.flatten(-2).sizes(), (Shape{2, 3, 20}));
  EXPECT_EQ(x.flatten(2, 2).sizes(), (Shape{2, 3, 4, 5}));
  expect_view_of(x.flatten(1, -1), x);
  Tensor p = x.permute({0, 2, 1, 3});
  Tensor f = p.flatten(1, 2);  // dims 1 and 2 are not adjacent in memory: a copy
  EXPECT_FALSE(f.shares_storage(x));
  expect_close(f, values(p), {2, 12, 5}, 0, 0);
  Tensor s = full({}, 3.0).flatten();
  EXPECT_EQ(s.sizes(), (Shape{1}));
  EXPECT_COIL_ERROR(x.flatten(2, 1), "start_dim 2 comes after end_dim 1");
  EXPECT_COIL_ERROR(x.flatten(0, 4), "dim 4 is out of range");
}

// Disabled: view.cpp's meta_flatten returns [1] for a 0-dim input before wrapping start_dim and
// end_dim, so flatten(scalar, 5) succeeds; torch wraps (and rejects) them first.
TEST(Flatten, ZeroDimValidatesDims) { EXPECT_COIL_ERROR(full({}, 1.0).flatten(5), "out of range"); }

TEST(Unflatten, InfersMinusOneOverAnyLayout) {
  Tensor x = iota({2, 12});
  Tensor u = x.unflatten(-1, {3, -1});
  EXPECT_EQ(u.sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(u.strides(), (Shape{12, 4, 1}));
  expect_view_of(u, x);
  expect_close(u, values(x), {2, 3, 4}, 0, 0);
  Tensor t = x.t();  // [12, 2] strides [1, 12]: splitting dim 0 is still a view
  Tensor ut = t.unflatten(0, {2, 6});
  EXPECT_EQ(ut.strides(), (Shape{6, 1, 12}));
  Values vt(t);
  expect_close(ut,
               build({2, 6, 2},
                     [&](const Shape& i) {
                       return vt.at({i[0] * 6 + i[1], i[2]});
                     }),
               {2, 6, 2}, 0, 0);
  EXPECT_EQ(x.unflatten(0, {1, 2, 1}).sizes(), (Shape{1, 2, 1, 12}));
  EXPECT_COIL_ERROR(x.unflatten(1, {}), "sizes must not be empty");
  EXPECT_COIL_ERROR(x.unflatten(1, {5, -1}), "shape [5, -1] is invalid for an input of 12");
  EXPECT_COIL_ERROR(x.unflatten(1, {5, 2}), "shape [5, 2] is invalid for an input of 12");
  EXPECT_COIL_ERROR(x.unflatten(1, {-1, -1}), "only one dimension can be -1");
  EXPECT_COIL_ERROR(x.unflatten(2, {1}), "dim 2 is out of range");
}

// Disabled: view.cpp's meta_unflatten wraps dim against a 0-dim input and then reads
// x.sizes()[0] of an empty shape (out of bounds; it crashes under ASan). torch raises. Enable
// once meta_unflatten rejects 0-dim inputs.
TEST(Unflatten, ZeroDimIsAnError) {
  EXPECT_COIL_ERROR(full({}, 1.0).unflatten(0, {1}), "unflatten");
}

// ---- as_strided
// ----------------------------------------------------------------------------------

TEST(AsStrided, WindowsOffsetsAndBounds) {
  Tensor x = iota({10});
  Tensor w = x.as_strided({4, 3}, {2, 1}, 1);  // overlapping windows starting at 1, 3, 5, 7
  expect_close(w, {1, 2, 3, 3, 4, 5, 5, 6, 7, 7, 8, 9}, {4, 3}, 0, 0);
  expect_view_of(w, x);
  Tensor tail = x.slice(0, 4, std::nullopt);
  // Without an offset, the input's own offset is used (as torch).
  expect_close(tail.as_strided({2}, {3}), {4, 7}, {2}, 0, 0);
  EXPECT_EQ(x.as_strided({0, 100}, {100, 100}, 50).sizes(), (Shape{0, 100}));
  EXPECT_EQ(x.as_strided({}, {}, 9).item<double>(), 9);
  EXPECT_COIL_ERROR(x.as_strided({2, 2}, {1}), "must have the same length");
  EXPECT_COIL_ERROR(x.as_strided({2}, {-1}), "negative size or stride");
  EXPECT_COIL_ERROR(x.as_strided({-1}, {1}), "negative size or stride");
  expect_close(x.as_strided({4}, {3}), {0, 3, 6, 9}, {4}, 0, 0);  // reaches the last element
}

TEST(AsStrided, OutOfStorage) {
  Tensor x = iota({10});
  EXPECT_COIL_ERROR(x.as_strided({4}, {3}, 1), "reach element 10 but the storage holds 10");
  EXPECT_COIL_ERROR(x.as_strided({1}, {1}, -1), "negative storage offset -1");
}

// ---- split, split_with_sizes, chunk
// --------------------------------------------------------------

namespace {

// Each piece is a view of x along dim 1 covering [start, start + size), sizes as listed.
void expect_pieces(const std::vector<Tensor>& pieces, const Tensor& x, const Shape& sizes) {
  ASSERT_EQ(pieces.size(), sizes.size());
  Values vx(x);
  int64_t start = 0;
  for (size_t k = 0; k < pieces.size(); ++k) {
    Shape s = x.sizes();
    s[1] = sizes[k];
    expect_close(pieces[k],
                 build(s,
                       [&](const Shape& i) {
                         return vx.at({i[0], start + i[1], i[2]});
                       }),
                 s, 0, 0);
    expect_view_of(pieces[k], x);
    start += sizes[k];
  }
}

}  // namespace

TEST(Split, EvenSizesChunksAndWrites) {
  Tensor x = iota({2, 7, 3});
  expect_pieces(split(x, 3, 1), x, {3, 3, 1});
  expect_pieces(split(x, 7, -2), x, {7});
  expect_pieces(split(x, 10, 1), x, {7});
  expect_pieces(split(x, Shape{2, 0, 5}, 1), x, {2, 0, 5});
  expect_pieces(chunk(x, 3, 1), x, {3, 3, 1});
  expect_pieces(chunk(x, 7, 1), x, {1, 1, 1, 1, 1, 1, 1});
  expect_pieces(chunk(x, 9, 1), x, {1, 1, 1, 1, 1, 1, 1});  // never more pieces than elements
  Tensor six = iota({2, 6, 1});
  expect_pieces(chunk(six, 4, 1), six, {2, 2, 2});  // as torch: 3 pieces, not 4
  std::vector<Tensor> parts = split(x, 4, 1);
  parts[1].fill_(-1);
  EXPECT_EQ(values(x)[4 * 3], -1);  // x[0, 4, 0]
  EXPECT_EQ(split(empty({0}), 0).size(), 1u);
  EXPECT_EQ(split(empty({2, 0}), 3, 1).at(0).sizes(), (Shape{2, 0}));
}

TEST(Split, Errors) {
  Tensor x = zeros({2, 5});
  EXPECT_COIL_ERROR(split(x, 0, 1), "split_size must be positive, got 0");
  EXPECT_COIL_ERROR(split(x, -2, 1), "split_size must be positive, got -2");
  EXPECT_COIL_ERROR(split(x, 2, 2), "dim 2 is out of range");
  EXPECT_COIL_ERROR(split(full({}, 1.0), 1), "cannot split a 0-dim tensor");
  EXPECT_COIL_ERROR(split(x, Shape{2, 2}, 1), "split sizes [2, 2] add up to 4 but dim 1");
  EXPECT_COIL_ERROR(split(x, Shape{6, -1}, 1), "negative split size in [6, -1]");
  EXPECT_COIL_ERROR(chunk(x, 0, 1), "chunks must be positive, got 0");
  EXPECT_COIL_ERROR(chunk(full({}, 1.0), 1), "cannot chunk a 0-dim tensor");
  EXPECT_COIL_ERROR(chunk(x, 2, -3), "dim -3 is out of range");
}

// Disabled: torch.chunk of an empty dim returns `chunks` empty pieces (it calls
// split_with_sizes so the count is kept); view.cpp's meta_chunk returns one. Enable once fixed.
TEST(Split, ChunkOfEmptyDimKeepsCount) { EXPECT_EQ(chunk(empty({0}), 3).size(), 3u); }

// ---- every dtype through a chain of views
// ----------------------------------------------------------

TEST(Views, ChainOfViewsEveryDType) {
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor base = sample({4, 5, 6}, dt);
    Values vb(base);
    // v[a, b, c, e] = base[5 - 2 * c ... ]: permute, slice with step, select, unsqueeze, expand.
    Tensor v = base.permute({2, 0, 1})            // [6, 4, 5]
                   .slice(0, 1, std::nullopt, 2)  // rows 1, 3, 5 of the old dim 2
                   .select(2, -2)                 // old dim 1 at 3
                   .unsqueeze(1)                  // [3, 1, 4]
                   .expand({2, 3, 2, 4});
    expect_view_of(v, base);
    expect_exact(v, dt,
                 build({2, 3, 2, 4},
                       [&](const Shape& i) {
                         return vb.at({i[3], 3, 1 + 2 * i[1]});
                       }),
                 {2, 3, 2, 4});
    // Writes through a (non-expanded) view land in the base.
    Tensor w = base.permute({2, 0, 1}).slice(0, 1, std::nullopt, 2).select(2, -2);
    w.fill_(dt == kBool ? 0 : 9);
    Values after(base);
    for (int64_t a = 0; a < 4; ++a)
      for (int64_t b = 0; b < 5; ++b)
        for (int64_t c = 0; c < 6; ++c) {
          bool hit = b == 3 && c % 2 == 1;
          EXPECT_EQ(after.at({a, b, c}), hit ? (dt == kBool ? 0 : 9) : vb.at({a, b, c}));
        }
  }
}

// ---- meta functions give the geometry without data ---------------------------------------------

TEST(Views, MetaOnProxies) {
  Tensor p = meta_tensor(TensorMeta{kFloat32, {2, 3, 4}, {12, 4, 1}, 5, kCPU});
  auto geom = [](OpId op, std::vector<Arg> args) { return run_meta(op, args).at(0); };
  TensorMeta m = geom(OpId::permute, {p, Shape{2, 0, 1}});
  EXPECT_EQ(m.sizes, (Shape{4, 2, 3}));
  EXPECT_EQ(m.strides, (Shape{1, 12, 4}));
  EXPECT_EQ(m.offset, 5);
  EXPECT_EQ(geom(OpId::slice, {p, int64_t{1}, int64_t{1}, Arg(), int64_t{1}}).offset, 9);
  EXPECT_EQ(geom(OpId::view, {p, Shape{6, -1}}).sizes, (Shape{6, 4}));
  // as_strided cannot check a proxy's storage bounds, and does not try to.
  EXPECT_EQ(geom(OpId::as_strided, {p, Shape{100}, Shape{1}, int64_t{0}}).sizes, (Shape{100}));
  EXPECT_EQ(run_meta(OpId::chunk, {p, int64_t{2}, int64_t{2}}).size(), 2u);
}
