// cat, stack, pad, repeat, flip, tril/triu against references written as plain loops.
#include "graph/registry.h"
#include "ops/shape_testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

// A proxy of these sizes: metadata only, so a meta function that reads data fails.
Tensor proxy(const Shape& sizes, DType dtype = kFloat32, Device device = kCPU) {
  return meta_tensor(TensorMeta{dtype, sizes, contiguous_strides(sizes), 0, device});
}

}  // namespace

// ---- cat ---------------------------------------------------------------------------------------

TEST(Cat, EveryDTypeNonContiguousNegativeDim) {
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = noncontiguous(sample({2, 3, 4}, dt));
    Tensor b = sample({2, 1, 4}, dt);
    Tensor c = sample({2, 0, 4}, dt);
    Values va(a), vb(b);
    for (int64_t dim : {1, -2}) {
      Tensor out = cat({a, c, b}, dim);
      expect_exact(out, dt,
                   build({2, 4, 4},
                         [&](const Shape& i) {
                           return i[1] < 3 ? va.at(i) : vb.at({i[0], i[1] - 3, i[2]});
                         }),
                   {2, 4, 4});
    }
  }
}

TEST(Cat, EachDimAndOneTensor) {
  Tensor a = sample({2, 3}, kFloat64), b = sample({2, 3}, kFloat64);
  Values va(a), vb(b);
  expect_exact(cat({a, b}, 0), kFloat64,
               build({4, 3},
                     [&](const Shape& i) {
                       return i[0] < 2 ? va.at(i) : vb.at({i[0] - 2, i[1]});
                     }),
               {4, 3});
  expect_exact(cat({a, b}, -1), kFloat64,
               build({2, 6},
                     [&](const Shape& i) {
                       return i[1] < 3 ? va.at(i) : vb.at({i[0], i[1] - 3});
                     }),
               {2, 6});
  Tensor single = cat({a.t()}, 0);
  expect_exact(single, kFloat64,
               build({3, 2},
                     [&](const Shape& i) {
                       return va.at({i[1], i[0]});
                     }),
               {3, 2});
  EXPECT_FALSE(single.shares_storage(a));
  EXPECT_TRUE(single.is_contiguous());
}

TEST(Cat, PromotesDTypes) {
  Tensor i = tensor<int32_t>({1, -2}), h = tensor<float>({0.5f}).to(kFloat16);
  Tensor out = cat({i, h});
  expect_exact(out, kFloat16, {1, -2, 0.5}, {3});
  expect_exact(cat({tensor<bool>({true}), tensor<uint8_t>({7})}), kUInt8, {1, 7}, {2});
  expect_exact(cat({tensor<int8_t>({-3}), tensor<uint8_t>({200})}), kInt32, {-3, 200}, {2});
  expect_exact(cat({tensor<float>({1.5f}).to(kBFloat16), tensor<float>({2.5f}).to(kFloat16)}),
               kFloat32, {1.5, 2.5}, {2});
}

TEST(Cat, SkipsOneDimEmptyTensorsAsTorch) {
  Tensor a = sample({2, 3}, kFloat32);
  Tensor out = cat({empty({0}), a, empty({0}, kFloat64)}, 1);
  EXPECT_EQ(out.dtype(), kFloat64);  // the skipped tensors still take part in promotion
  expect_close(out, values(a), {2, 3}, 0, 0);
  EXPECT_EQ(cat({empty({0}), empty({0})}, 5).sizes(), (Shape{0}));
  EXPECT_EQ(cat({empty({0, 3}), empty({2, 3})}, 0).sizes(), (Shape{2, 3}));
  EXPECT_EQ(cat({empty({2, 0}), empty({2, 0})}, 1).sizes(), (Shape{2, 0}));
}

TEST(Cat, Errors) {
  Tensor a = zeros({2, 3});
  EXPECT_COIL_ERROR(cat({}, 0), "non-empty list");
  EXPECT_COIL_ERROR(cat({a, zeros({})}, 0), "tensor 1 is zero-dimensional (f32[])");
  EXPECT_COIL_ERROR(cat({a, zeros({2, 3, 1})}, 0), "same number of dims");
  EXPECT_COIL_ERROR(cat({a, zeros({2, 4})}, 0), "tensor 1 is f32[2, 4] (dim 1)");
  EXPECT_COIL_ERROR(cat({a, a}, 2), "dim 2 is out of range");
  EXPECT_COIL_ERROR(cat({a, a}, -3), "dim -3 is out of range");
  EXPECT_COIL_ERROR(cat({a, proxy({2, 3}, kFloat32, kCUDA)}, 0), "on one device");
}

// ---- stack -------------------------------------------------------------------------------------

TEST(Stack, EveryDTypeEveryDim) {
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = noncontiguous(sample({2, 3}, dt)), b = sample({2, 3}, dt);
    Values va(a), vb(b);
    auto pick = [&](int64_t which, int64_t r, int64_t c) {
      return which == 0 ? va.at({r, c}) : vb.at({r, c});
    };
    expect_exact(stack({a, b}), dt,
                 build({2, 2, 3}, [&](const Shape& i) { return pick(i[0], i[1], i[2]); }),
                 {2, 2, 3});
    expect_exact(stack({a, b}, 1), dt,
                 build({2, 2, 3}, [&](const Shape& i) { return pick(i[1], i[0], i[2]); }),
                 {2, 2, 3});
    expect_exact(stack({a, b}, -1), dt,
                 build({2, 3, 2}, [&](const Shape& i) { return pick(i[2], i[0], i[1]); }),
                 {2, 3, 2});
  }
}

TEST(Stack, ScalarsEmptyAndPromotion) {
  expect_exact(stack({scalar_tensor(1), scalar_tensor(2.5)}), kFloat32, {1, 2.5}, {2});
  EXPECT_EQ(stack({empty({0, 2}), empty({0, 2})}, 1).sizes(), (Shape{0, 2, 2}));
  Tensor one = sample({3}, kInt64);
  expect_exact(stack({one}), kInt64, values(one), {1, 3});
}

TEST(Stack, Errors) {
  EXPECT_COIL_ERROR(stack({}), "non-empty list");
  EXPECT_COIL_ERROR(stack({zeros({2, 3}), zeros({3, 2})}), "tensor 1 is f32[3, 2]");
  EXPECT_COIL_ERROR(stack({zeros({2}), zeros({2})}, 2), "dim 2 is out of range");
  EXPECT_COIL_ERROR(stack({zeros({2}), zeros({2})}, -3), "dim -3 is out of range");
  EXPECT_COIL_ERROR(stack({zeros({2}), proxy({2}, kFloat32, kCUDA)}), "on one device");
}

// ---- pad ---------------------------------------------------------------------------------------

namespace {

// Constant padding by definition: out[i] = x[i - left] where that is inside x, else value.
std::vector<double> constant_pad_ref(const Tensor& x, const Shape& pad, double value,
                                     Shape* out_sizes) {
  Values vx(x);
  int64_t nd = x.dim();
  Shape left(nd, 0), sizes = x.sizes();
  for (size_t k = 0; k < pad.size() / 2; ++k) {
    int64_t d = nd - 1 - static_cast<int64_t>(k);
    left[d] = pad[2 * k];
    sizes[d] += pad[2 * k] + pad[2 * k + 1];
  }
  *out_sizes = sizes;
  return build(sizes, [&](const Shape& i) {
    Shape src(i.size());
    for (int64_t d = 0; d < nd; ++d) {
      src[d] = i[d] - left[d];
      if (src[d] < 0 || src[d] >= x.sizes()[d]) return value;
    }
    return vx.at(src);
  });
}

}  // namespace

TEST(Pad, ConstantEveryDType) {
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = noncontiguous(sample({2, 3, 4}, dt));
    double value = dt == kBool ? 1 : 3;
    for (const Shape& pad : {Shape{1, 2}, Shape{0, 0, 2, 1}, Shape{-1, 2, 1, -2, 0, 1}, Shape{}}) {
      SCOPED_TRACE(shape_str(pad));
      Shape sizes;
      std::vector<double> ref = constant_pad_ref(x, pad, value, &sizes);
      expect_exact(coil::pad(x, pad, "constant", value), dt, ref, sizes);
    }
  }
}

TEST(Pad, ConstantEdgeCases) {
  // Default value 0, cropping to nothing, padding an empty dim, a 0-dim input.
  Tensor x = sample({3, 5}, kFloat32);
  Shape sizes;
  expect_close(coil::pad(x, {2, 0}), constant_pad_ref(x, {2, 0}, 0, &sizes), sizes, 0, 0);
  EXPECT_EQ(coil::pad(x, {-2, -3}).sizes(), (Shape{3, 0}));
  expect_close(coil::pad(empty({2, 0}), {1, 2}, "constant", -1), std::vector<double>(6, -1),
               {2, 3});
  expect_close(coil::pad(full({}, 4.0), {}), {4}, {});
  // A fractional value truncates for integer tensors, as torch's fill.
  expect_exact(coil::pad(tensor<int32_t>({5}), {1, 0}, "constant", 2.7), kInt32, {2, 5}, {2});
}

TEST(Pad, ReflectAndReplicateKnownValues) {
  Tensor x = arange(5, kFloat32).view({1, 5});
  expect_close(coil::pad(x, {2, 3}, "reflect"), {2, 1, 0, 1, 2, 3, 4, 3, 2, 1}, {1, 10});
  expect_close(coil::pad(x, {2, 3}, "replicate"), {0, 0, 0, 1, 2, 3, 4, 4, 4, 4}, {1, 10});
  expect_close(coil::pad(x, {-1, 2}, "reflect"), {1, 2, 3, 4, 3, 2}, {1, 6});
  expect_close(coil::pad(x, {2, -3}, "replicate"), {0, 0, 0, 1}, {1, 4});
  Tensor m = arange(6, kFloat32).view({1, 2, 3});
  expect_close(coil::pad(m, {1, 1, 1, 0}, "reflect"),
               {4, 3, 4, 5, 4,  //
                1, 0, 1, 2, 1,  //
                4, 3, 4, 5, 4},
               {1, 3, 5});
}

namespace {

// Reflection mirrors about the edge elements (edge not repeated); replication repeats them.
int64_t mirror(int64_t i, int64_t n, bool reflect) {
  if (!reflect) return i < 0 ? 0 : i >= n ? n - 1 : i;
  if (i < 0) return -i;
  if (i >= n) return (n - 1) - (i - (n - 1));
  return i;
}

}  // namespace

TEST(Pad, ReflectReplicateRandom) {
  struct Case {
    Shape sizes, pad;
  };
  for (const Case& c :
       {Case{{3, 6}, {2, 5}}, Case{{2, 3, 4}, {3, 0}}, Case{{2, 4, 5}, {1, 2, 3, -1}},
        Case{{2, 1, 3, 4}, {-1, 3, 2, 2}}, Case{{0, 2, 3}, {1, 1}}}) {
    for (DType dt : {kFloat32, kBFloat16, kInt64, kBool}) {
      for (bool reflect : {true, false}) {
        SCOPED_TRACE(shape_str(c.sizes) + " pad " + shape_str(c.pad) + " " + dtype_name(dt) +
                     (reflect ? " reflect" : " replicate"));
        Tensor x = noncontiguous(sample(c.sizes, dt));
        Values vx(x);
        int64_t nd = x.dim(), k = static_cast<int64_t>(c.pad.size()) / 2;
        Shape left(nd, 0), sizes = c.sizes;
        for (int64_t j = 0; j < k; ++j) {
          left[nd - 1 - j] = c.pad[2 * j];
          sizes[nd - 1 - j] += c.pad[2 * j] + c.pad[2 * j + 1];
        }
        auto ref = build(sizes, [&](const Shape& i) {
          Shape src(i.size());
          for (int64_t d = 0; d < nd; ++d) src[d] = mirror(i[d] - left[d], c.sizes[d], reflect);
          return vx.at(src);
        });
        expect_exact(coil::pad(x, c.pad, reflect ? "reflect" : "replicate"), dt, ref, sizes);
      }
    }
  }
}

TEST(Pad, Errors) {
  Tensor x = zeros({2, 3, 4});
  EXPECT_COIL_ERROR(coil::pad(x, {1}), "length must be even");
  EXPECT_COIL_ERROR(coil::pad(x, {1, 1, 1, 1, 1, 1, 1, 1}), "the input is f32[2, 3, 4]");
  EXPECT_COIL_ERROR(coil::pad(x, {-3, -2}), "negative size -1");
  EXPECT_COIL_ERROR(coil::pad(x, {1, 1}, "circular"), "mode \"circular\" is not supported");
  EXPECT_COIL_ERROR(coil::pad(x, {4, 0}, "reflect"), "must be smaller than that dim's size 4");
  EXPECT_COIL_ERROR(coil::pad(x, {0, 1, 3, 0}, "reflect"), "smaller than that dim's size 3");
  EXPECT_COIL_ERROR(coil::pad(zeros({4}), {1, 1}, "reflect"), "1 or 2 more leading dims");
  EXPECT_COIL_ERROR(coil::pad(x, {1, 1, 1, 1, 1, 1}, "replicate"), "1 or 2 more leading dims");
  EXPECT_COIL_ERROR(coil::pad(x, {1, 1}, "reflect", 2.0), "takes no fill value");
  EXPECT_COIL_ERROR(coil::pad(zeros({2, 0}), {1, 1}, "replicate"), "needs non-empty dims");
  EXPECT_COIL_ERROR(coil::pad(zeros({2, 2, 0}), {1, 1}, "replicate"), "needs non-empty dims");
  EXPECT_COIL_ERROR(coil::pad(zeros({1, 2}), {-1, -1}, "replicate"), "leaves no elements");
}

// ---- repeat ------------------------------------------------------------------------------------

TEST(Repeat, EveryDTypeWithLeadingDims) {
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = noncontiguous(sample({2, 3}, dt));
    Values vx(x);
    expect_exact(repeat(x, {2, 1, 3}), dt,
                 build({2, 2, 9},
                       [&](const Shape& i) {
                         return vx.at({i[1], i[2] % 3});
                       }),
                 {2, 2, 9});
    expect_exact(repeat(x, {3, 2}), dt,
                 build({6, 6},
                       [&](const Shape& i) {
                         return vx.at({i[0] % 2, i[1] % 3});
                       }),
                 {6, 6});
  }
}

TEST(Repeat, EdgeCases) {
  Tensor x = sample({2, 1}, kFloat32);
  EXPECT_EQ(repeat(x, {0, 4}).sizes(), (Shape{0, 4}));
  EXPECT_EQ(repeat(x, {3, 0, 1}).sizes(), (Shape{3, 0, 1}));
  expect_close(repeat(full({}, 7.0), {2, 3}), std::vector<double>(6, 7), {2, 3});
  expect_close(repeat(full({}, 7.0), {}), {7}, {});
  Tensor r = repeat(x, {1, 1});
  expect_close(r, values(x), {2, 1}, 0, 0);
  EXPECT_FALSE(r.shares_storage(x));
  // An expanded (stride-0) input repeats its broadcast values.
  Tensor e = tensor<float>({1, 2}).view({2, 1}).expand({2, 3});
  expect_close(repeat(e, {1, 2}), {1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2}, {2, 6});
}

TEST(Repeat, Errors) {
  EXPECT_COIL_ERROR(repeat(zeros({2, 3}), {2}), "fewer entries than f32[2, 3]");
  EXPECT_COIL_ERROR(repeat(zeros({2, 3}), {2, -1}), "negative repeat count in [2, -1]");
}

// ---- flip --------------------------------------------------------------------------------------

TEST(Flip, EveryDTypeAndDimSet) {
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = noncontiguous(sample({3, 1, 4, 5}, dt));
    Values vx(x);
    for (const Shape& dims : {Shape{0}, Shape{-1}, Shape{2, 0}, Shape{0, 1, 2, 3}, Shape{}}) {
      SCOPED_TRACE(shape_str(dims));
      std::vector<bool> flipped(4, false);
      for (int64_t d : dims) flipped[(d + 4) % 4] = true;
      auto ref = build(x.sizes(), [&](const Shape& i) {
        Shape src = i;
        for (int64_t d = 0; d < 4; ++d)
          if (flipped[d]) src[d] = x.sizes()[d] - 1 - i[d];
        return vx.at(src);
      });
      Tensor out = flip(x, dims);
      expect_exact(out, dt, ref, x.sizes());
      EXPECT_FALSE(out.shares_storage(x));
    }
  }
}

TEST(Flip, EdgeCases) {
  expect_close(flip(arange(5, kFloat32).slice(0, 0, std::nullopt, 2), {0}), {4, 2, 0}, {3});
  EXPECT_EQ(flip(empty({0, 3}), {0, 1}).sizes(), (Shape{0, 3}));
  expect_close(flip(full({}, 2.0), {0}), {2}, {});
  expect_close(flip(full({}, 2.0), {-1}), {2}, {});
  // Flipping a stride-0 dim is a no-op on values.
  expect_close(flip(tensor<float>({1, 2}).expand({3, 2}), {0, 1}), {2, 1, 2, 1, 2, 1}, {3, 2});
}

TEST(Flip, Errors) {
  EXPECT_COIL_ERROR(flip(zeros({2, 3}), {0, -2}), "appears more than once");
  EXPECT_COIL_ERROR(flip(zeros({2, 3}), {2}), "dim 2 is out of range");
  EXPECT_COIL_ERROR(flip(zeros({}), {1}), "dim 1 is out of range");
}

// ---- tril, triu --------------------------------------------------------------------------------

TEST(Triangle, EveryDTypeBatchedNonContiguous) {
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = noncontiguous(sample({2, 3, 4, 5}, dt));
    Values vx(x);
    for (int64_t diag : {-5, -1, 0, 2, 6}) {
      SCOPED_TRACE(diag);
      auto lower =
          build(x.sizes(), [&](const Shape& i) { return i[3] - i[2] <= diag ? vx.at(i) : 0.0; });
      auto upper =
          build(x.sizes(), [&](const Shape& i) { return i[3] - i[2] >= diag ? vx.at(i) : 0.0; });
      expect_exact(tril(x, diag), dt, lower, x.sizes());
      expect_exact(triu(x, diag), dt, upper, x.sizes());
    }
  }
}

TEST(Triangle, ShapesAndErrors) {
  Tensor tall = sample({5, 2}, kFloat64);
  Values v(tall);
  expect_exact(tril(tall), kFloat64,
               build({5, 2}, [&](const Shape& i) { return i[1] <= i[0] ? v.at(i) : 0.0; }), {5, 2});
  expect_exact(triu(tall, -3), kFloat64,
               build({5, 2}, [&](const Shape& i) { return i[1] - i[0] >= -3 ? v.at(i) : 0.0; }),
               {5, 2});
  EXPECT_EQ(tril(empty({3, 0, 4})).sizes(), (Shape{3, 0, 4}));
  expect_close(triu(ones({1, 1}), 1), {0}, {1, 1});
  EXPECT_COIL_ERROR(tril(zeros({3})), "tril: expects a tensor with at least 2 dims");
  EXPECT_COIL_ERROR(triu(zeros({})), "triu: expects a tensor with at least 2 dims");
}

// ---- large inputs take the threaded paths
// --------------------------------------------------------

TEST(ShapeOps, LargeInputsMatchSmallPathSemantics) {
  Tensor x = sample({300, 257}, kFloat32);
  Values vx(x);
  expect_exact(flip(x, {1}), kFloat32,
               build({300, 257},
                     [&](const Shape& i) {
                       return vx.at({i[0], 256 - i[1]});
                     }),
               {300, 257});
  expect_exact(tril(x, 3), kFloat32,
               build({300, 257}, [&](const Shape& i) { return i[1] - i[0] <= 3 ? vx.at(i) : 0.0; }),
               {300, 257});
  expect_exact(
      coil::pad(x.unsqueeze(0), {1, 2, 3, 0}, "replicate"), kFloat32,
      build({1, 303, 260},
            [&](const Shape& i) {
              return vx.at({std::max<int64_t>(i[1] - 3, 0), std::clamp<int64_t>(i[2] - 1, 0, 256)});
            }),
      {1, 303, 260});
}

// ---- meta functions read no data
// -----------------------------------------------------------------

TEST(ShapeOps, MetaOnProxies) {
  Tensor a = proxy({2, 3}), b = proxy({2, 5}, kFloat64);
  auto meta = [](OpId op, std::vector<Arg> args) { return run_meta(op, args).at(0); };
  TensorMeta m = meta(OpId::cat, {std::vector<Tensor>{a, b}, int64_t{-1}});
  EXPECT_EQ(m.sizes, (Shape{2, 8}));
  EXPECT_EQ(m.dtype, kFloat64);
  EXPECT_EQ(meta(OpId::stack, {std::vector<Tensor>{a, a}, int64_t{2}}).sizes, (Shape{2, 3, 2}));
  EXPECT_EQ(meta(OpId::pad, {a, Shape{1, 2, -1, 0}, std::string("constant"), 0.0}).sizes,
            (Shape{1, 6}));
  EXPECT_EQ(meta(OpId::repeat, {a, Shape{2, 2, 2}}).sizes, (Shape{2, 4, 6}));
  EXPECT_EQ(meta(OpId::flip, {a, Shape{0}}).sizes, (Shape{2, 3}));
  EXPECT_EQ(meta(OpId::tril, {a, int64_t{0}}).strides, (Shape{3, 1}));
  Tensor idx = proxy({2, 2}, kInt64);
  EXPECT_EQ(meta(OpId::gather, {a, int64_t{1}, idx}).sizes, (Shape{2, 2}));
  EXPECT_EQ(meta(OpId::index_select, {a, int64_t{1}, proxy({4}, kInt32)}).sizes, (Shape{2, 4}));
  EXPECT_EQ(meta(OpId::scatter_add, {a, int64_t{0}, idx, proxy({2, 3})}).sizes, (Shape{2, 3}));
}
