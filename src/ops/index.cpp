// Indexing ops: gather, index_select, scatter_add. Index values are data, so their bounds are
// checked by the kernels (meta functions see only shapes). As in torch, gather and scatter treat
// a 0-dim tensor like a 1-D tensor of one element.
#include <algorithm>
#include <array>
#include <atomic>
#include <type_traits>

#include "ops/meta_util.h"
#include "runtime/convert.h"

namespace coil::ops {

namespace {

// The first out-of-range index met inside a parallel loop, reported once the loop is over: an
// exception must not escape an OpenMP region.
class BadIndex {
 public:
  void record(int64_t v) {
    if (!seen_.exchange(true)) value_.store(v);
  }
  void check(const char* op, int64_t dim, const Tensor& self) const {
    if (!seen_.load()) return;
    int64_t n = self.dim() > 0 ? self.sizes()[dim] : 1;
    throw Error(detail::str_cat(op, ": index ", value_.load(), " is out of bounds for dim ", dim,
                                " of ", describe(self), " (size ", n, "); indices must lie in [0, ",
                                n, ")"));
  }

 private:
  std::atomic<bool> seen_{false};
  std::atomic<int64_t> value_{0};
};

Shape sizes_1d(const Tensor& t) { return t.dim() > 0 ? t.sizes() : Shape{1}; }
Tensor at_least_1d(const Tensor& t) {
  return t.dim() > 0 ? t : alias_with(t, {1}, {1}, t.storage_offset());
}
Shape without(Shape s, int64_t dim) {
  s.erase(s.begin() + dim);
  return s;
}

void check_index_dtype(const Tensor& index, const char* op) {
  COIL_CHECK(index.dtype() == kInt64 || index.dtype() == kInt32, op,
             ": index must be int64 or int32, got ", describe(index),
             "; convert it with .to(coil::kInt64)");
}

template <typename F>
void dispatch_index(DType t, F&& f) {
  if (t == kInt32) {
    f.template operator()<int32_t>();
  } else {
    f.template operator()<int64_t>();
  }
}

// out[p] = self[p with coordinate `dim` replaced by index[p]], for every position p of out;
// all three at least 1-D. `idx_strides` are the index's strides as seen from out's shape.
template <typename T, typename I>
void gather_kernel(const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index,
                   const Shape& idx_strides, BadIndex& bad) {
  Shape self_strides = self.strides();
  self_strides[dim] = 0;  // the index supplies that coordinate
  int64_t n = self.sizes()[dim], step = self.strides()[dim];
  const T* ps = static_cast<const T*>(self.data_ptr());
  const I* pi = static_cast<const I*>(index.data_ptr());
  T* po = static_cast<T*>(out.data_ptr());
  for_each_row<3>(out.sizes(), {out.strides(), self_strides, idx_strides},
                  [&](std::array<int64_t, 3> off, int64_t len, std::array<int64_t, 3> st) {
                    for (int64_t i = 0; i < len; ++i) {
                      auto k = static_cast<int64_t>(pi[off[2] + i * st[2]]);
                      if (k < 0 || k >= n) {
                        bad.record(k);
                        continue;
                      }
                      po[off[0] + i * st[0]] = ps[off[1] + i * st[1] + k * step];
                    }
                  });
}

template <typename T>
T accumulate(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a || b;
  } else if constexpr (std::is_integral_v<T>) {
    // Wraps on overflow as torch does; unsigned arithmetic keeps that well defined.
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return convert<T>(static_cast<acc_type<T>>(a) + static_cast<acc_type<T>>(b));
  }
}

// out[... index[p] ...] += src[p] along `dim`. Positions that differ outside `dim` never write
// the same element, so they run in parallel, in blocks of kScatterBlock neighbours along the
// innermost dim; a block walks `dim` in order (each element sums in index order, every run
// alike), its positions innermost, so that an embedding's gradient (a few hundred features,
// thousands of tokens) adds whole cache lines and keeps every core busy.
constexpr int64_t kScatterBlock = 16;

template <typename T, typename I>
void scatter_add_kernel(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                        BadIndex& bad) {
  const int64_t len = index.sizes()[dim], n = out.sizes()[dim];
  const int64_t is = index.strides()[dim], ss = src.strides()[dim], os = out.strides()[dim];
  const Shape sizes = without(index.sizes(), dim);
  const std::array<Shape, 3> strides = {without(index.strides(), dim), without(src.strides(), dim),
                                        without(out.strides(), dim)};
  const auto outer_dims = static_cast<int64_t>(sizes.size()) - 1;  // -1 for a 1-D scatter
  const int64_t inner = sizes.empty() ? 1 : sizes.back();
  int64_t rows = 1;
  for (int64_t d = 0; d < outer_dims; ++d) rows *= sizes[d];
  if (len == 0 || rows * inner == 0) return;
  const int64_t blocks = (inner + kScatterBlock - 1) / kScatterBlock;
  const I* pi = static_cast<const I*>(index.data_ptr());
  const T* ps = static_cast<const T*>(src.data_ptr());
  T* po = static_cast<T*>(out.data_ptr());
  auto block = [&](int64_t b) {
    const int64_t first = (b % blocks) * kScatterBlock;
    const int64_t count = std::min(kScatterBlock, inner - first);
    std::array<int64_t, 3> off{}, step{};
    int64_t rem = b / blocks;
    for (int64_t d = outer_dims - 1; d >= 0; --d) {
      const int64_t i = rem % sizes[d];
      rem /= sizes[d];
      for (size_t t = 0; t < 3; ++t) off[t] += i * strides[t][d];
    }
    for (size_t t = 0; t < 3 && !sizes.empty(); ++t) {
      step[t] = strides[t].back();
      off[t] += first * step[t];
    }
    for (int64_t k = 0; k < len; ++k)
      for (int64_t p = 0; p < count; ++p) {
        auto j = static_cast<int64_t>(pi[off[0] + p * step[0] + k * is]);
        if (j < 0 || j >= n) {
          bad.record(j);
          continue;
        }
        T& o = po[off[2] + p * step[2] + j * os];
        o = accumulate(o, ps[off[1] + p * step[1] + k * ss]);
      }
  };
  const int64_t tasks = rows * blocks;
  if (tasks > 1 && rows * inner * len >= kParallelGrain) {
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < tasks; ++b) block(b);
  } else {
    for (int64_t b = 0; b < tasks; ++b) block(b);
  }
}

}  // namespace

// ---- gather ------------------------------------------------------------------------------------

// As torch: index has self's number of dims and is no larger outside `dim`; the result has
// index's shape. An empty index skips the checks.
std::vector<TensorMeta> meta_gather(const Args& a) {
  const Tensor& x = a.tensor(0);
  const Tensor& index = a.tensor(2);
  common_device(a, {0, 2}, "gather");
  int64_t d = wrap_dim(a.i64(1), x.dim(), "gather");
  if (index.numel() > 0) {
    check_index_dtype(index, "gather");
    Shape xs = sizes_1d(x), is = sizes_1d(index);
    COIL_CHECK(xs.size() == is.size(), "gather: index ", describe(index),
               " must have as many dims ", "as self ", describe(x));
    for (size_t k = 0; k < xs.size(); ++k)
      COIL_CHECK(static_cast<int64_t>(k) == d || is[k] <= xs[k], "gather: index ", describe(index),
                 " is larger than self ", describe(x), " in dim ", k, "; only dim ", d,
                 " (the gather dim) may be larger");
  }
  return one(contiguous_meta(x.dtype(), index.sizes(), x.device()));
}

std::vector<Tensor> eager_gather(const Args& a, const std::vector<TensorMeta>& out) {
  const Tensor& x = a.tensor(0);
  const Tensor& index = a.tensor(2);
  Tensor result = empty_from_meta(out[0]);
  if (result.numel() == 0) return one(result);
  int64_t d = wrap_dim(a.i64(1), x.dim(), "gather");
  Tensor idx = at_least_1d(index);
  BadIndex bad;
  dispatch_dtype(x.dtype(), [&]<typename T>() {
    dispatch_index(index.dtype(), [&]<typename I>() {
      gather_kernel<T, I>(at_least_1d(result), at_least_1d(x), d, idx, idx.strides(), bad);
    });
  });
  bad.check("gather", d, x);
  return one(result);
}

// ---- index_select ------------------------------------------------------------------------------

std::vector<TensorMeta> meta_index_select(const Args& a) {
  const Tensor& x = a.tensor(0);
  const Tensor& index = a.tensor(2);
  common_device(a, {0, 2}, "index_select");
  int64_t d = wrap_dim(a.i64(1), x.dim(), "index_select");
  COIL_CHECK(index.dim() <= 1, "index_select: index must be 1-D or 0-dim, got ", describe(index),
             "; flatten it first");
  check_index_dtype(index, "index_select");
  COIL_CHECK(x.dim() > 0 || index.numel() == 1, "index_select: a 0-dim self ", describe(x),
             " takes exactly one index, got ", describe(index));
  Shape sizes = x.sizes();
  if (x.dim() > 0) sizes[d] = index.numel();
  return one(contiguous_meta(x.dtype(), sizes, x.device()));
}

// The index is checked first, so that an out-of-range index is an error even when the result
// is empty (as torch); then a gather with the index broadcast along every other dim.
std::vector<Tensor> eager_index_select(const Args& a, const std::vector<TensorMeta>& out) {
  const Tensor& x = a.tensor(0);
  const Tensor& index = a.tensor(2);
  int64_t d = wrap_dim(a.i64(1), x.dim(), "index_select");
  BadIndex bad;
  int64_t n = sizes_1d(x)[d];
  Tensor idx = at_least_1d(index);
  dispatch_index(index.dtype(), [&]<typename I>() {
    const I* p = static_cast<const I*>(idx.data_ptr());
    for (int64_t k = 0; k < idx.numel(); ++k) {
      auto v = static_cast<int64_t>(p[k * idx.strides()[0]]);
      if (v < 0 || v >= n) bad.record(v);
    }
  });
  bad.check("index_select", d, x);

  Tensor result = empty_from_meta(out[0]);
  if (result.numel() == 0) return one(result);
  Tensor out1 = at_least_1d(result);
  Shape idx_strides(out1.dim(), 0);
  idx_strides[d] = idx.strides()[0];
  dispatch_dtype(x.dtype(), [&]<typename T>() {
    dispatch_index(index.dtype(), [&]<typename I>() {
      gather_kernel<T, I>(out1, at_least_1d(x), d, idx, idx_strides, bad);
    });
  });
  return one(result);
}

// ---- scatter_add -------------------------------------------------------------------------------

// As torch: self, index and src have the same number of dims; index is no larger than src
// anywhere, nor than self outside `dim`; src has self's dtype. An empty index skips the checks.
std::vector<TensorMeta> meta_scatter_add(const Args& a) {
  const Tensor& x = a.tensor(0);
  const Tensor& index = a.tensor(2);
  const Tensor& src = a.tensor(3);
  common_device(a, {0, 2, 3}, "scatter_add");
  int64_t d = wrap_dim(a.i64(1), x.dim(), "scatter_add");
  COIL_CHECK(src.dtype() == x.dtype(), "scatter_add: src ", describe(src),
             " must have the dtype of self ", describe(x), "; convert it with .to(...)");
  if (index.numel() > 0) {
    check_index_dtype(index, "scatter_add");
    Shape xs = sizes_1d(x), is = sizes_1d(index), ss = sizes_1d(src);
    COIL_CHECK(xs.size() == is.size() && ss.size() == is.size(), "scatter_add: self ", describe(x),
               ", index ", describe(index), " and src ", describe(src),
               " must have the same number of dims");
    for (size_t k = 0; k < xs.size(); ++k)
      COIL_CHECK(is[k] <= ss[k] && (static_cast<int64_t>(k) == d || is[k] <= xs[k]),
                 "scatter_add: index ", describe(index), " must be no larger than src ",
                 describe(src), " in every dim, and no larger than self ", describe(x),
                 " except in dim ", d, " (dim ", k, " is not)");
  }
  return one(contiguous_meta(x.dtype(), x.sizes(), x.device()));
}

std::vector<Tensor> eager_scatter_add(const Args& a, const std::vector<TensorMeta>& out) {
  const Tensor& x = a.tensor(0);
  const Tensor& index = a.tensor(2);
  Tensor result = empty_from_meta(out[0]);
  copy_into(result, x);
  if (index.numel() == 0) return one(result);
  int64_t d = wrap_dim(a.i64(1), x.dim(), "scatter_add");
  BadIndex bad;
  dispatch_dtype(x.dtype(), [&]<typename T>() {
    dispatch_index(index.dtype(), [&]<typename I>() {
      scatter_add_kernel<T, I>(at_least_1d(result), d, at_least_1d(index), at_least_1d(a.tensor(3)),
                               bad);
    });
  });
  bad.check("scatter_add", d, x);
  return one(result);
}

}  // namespace coil::ops
