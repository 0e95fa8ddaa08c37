// Shape ops that copy data: cat, stack, pad, repeat, flip, tril/triu. Most kernels describe the
// input or the output as a strided view (alias_with) and let copy_into move the data, so
// layouts, dtype conversion and threading come from one place.
#include <algorithm>

#include "ops/meta_util.h"
#include "runtime/convert.h"

namespace coil::ops {

namespace {

// `t` narrowed to [start, start + len) along `dim`, as a view.
Tensor narrow_view(const Tensor& t, int64_t dim, int64_t start, int64_t len) {
  Shape sizes = t.sizes();
  sizes[dim] = len;
  return alias_with(t, sizes, t.strides(), t.storage_offset() + start * t.strides()[dim]);
}

// torch.cat's legacy rule: a 1-D empty tensor is skipped whatever the other shapes.
bool skipped_by_cat(const Tensor& t) { return t.dim() == 1 && t.sizes()[0] == 0; }

DType promoted_dtype(const std::vector<Tensor>& ts) {
  DType t = ts[0].dtype();
  for (const Tensor& x : ts) t = promote_types(t, x.dtype());
  return t;
}

Device common_list_device(const std::vector<Tensor>& ts, const char* op) {
  for (size_t i = 1; i < ts.size(); ++i)
    COIL_CHECK(ts[i].device() == ts[0].device(), op, ": expected all tensors on one device, but ",
               "tensor 0 is on ", ts[0].device().str(), " and tensor ", i, " on ",
               ts[i].device().str(), "; move them with .to(device)");
  return ts[0].device();
}

}  // namespace

// ---- cat, stack --------------------------------------------------------------------------------

std::vector<TensorMeta> meta_cat(const Args& a) {
  const std::vector<Tensor>& ts = a.tensors(0);
  COIL_CHECK(!ts.empty(), "cat: expected a non-empty list of tensors");
  for (size_t i = 0; i < ts.size(); ++i)
    COIL_CHECK(ts[i].dim() > 0, "cat: tensor ", i, " is zero-dimensional (", describe(ts[i]),
               ") and cannot be concatenated; unsqueeze it to 1-D first, or use stack");
  Device dev = common_list_device(ts, "cat");
  DType dtype = promoted_dtype(ts);
  auto first =
      std::find_if(ts.begin(), ts.end(), [](const Tensor& t) { return !skipped_by_cat(t); });
  if (first == ts.end()) return one(contiguous_meta(dtype, {0}, dev));  // all 1-D empty

  const Tensor& ref = *first;
  int64_t d = wrap_dim(a.i64(1), ref.dim(), "cat");
  Shape sizes = ref.sizes();
  sizes[d] = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& t = ts[i];
    if (skipped_by_cat(t)) continue;
    COIL_CHECK(t.dim() == ref.dim(), "cat: tensors must have the same number of dims, but tensor ",
               first - ts.begin(), " is ", describe(ref), " and tensor ", i, " is ", describe(t));
    for (int64_t k = 0; k < t.dim(); ++k)
      COIL_CHECK(k == d || t.sizes()[k] == ref.sizes()[k], "cat: sizes must match except in dim ",
                 d, ", but tensor ", first - ts.begin(), " is ", describe(ref), " and tensor ", i,
                 " is ", describe(t), " (dim ", k, ")");
    sizes[d] += t.sizes()[d];
  }
  return one(contiguous_meta(dtype, sizes, dev));
}

std::vector<Tensor> eager_cat(const Args& a, const std::vector<TensorMeta>& out) {
  Tensor result = empty_from_meta(out[0]);
  if (result.numel() == 0) return one(result);
  int64_t d = wrap_dim(a.i64(1), result.dim(), "cat");
  int64_t at = 0;
  for (const Tensor& t : a.tensors(0)) {
    if (skipped_by_cat(t)) continue;
    copy_into(narrow_view(result, d, at, t.sizes()[d]), t);
    at += t.sizes()[d];
  }
  return one(result);
}

std::vector<TensorMeta> meta_stack(const Args& a) {
  const std::vector<Tensor>& ts = a.tensors(0);
  COIL_CHECK(!ts.empty(), "stack: expected a non-empty list of tensors");
  for (size_t i = 1; i < ts.size(); ++i)
    COIL_CHECK(ts[i].sizes() == ts[0].sizes(), "stack: all tensors must have the same sizes, but ",
               "tensor 0 is ", describe(ts[0]), " and tensor ", i, " is ", describe(ts[i]));
  Device dev = common_list_device(ts, "stack");
  int64_t d = wrap_dim(a.i64(1), ts[0].dim() + 1, "stack");
  Shape sizes = ts[0].sizes();
  sizes.insert(sizes.begin() + d, static_cast<int64_t>(ts.size()));
  return one(contiguous_meta(promoted_dtype(ts), sizes, dev));
}

std::vector<Tensor> eager_stack(const Args& a, const std::vector<TensorMeta>& out) {
  Tensor result = empty_from_meta(out[0]);
  if (result.numel() == 0) return one(result);
  int64_t d = wrap_dim(a.i64(1), result.dim(), "stack");
  Shape sizes = result.sizes(), strides = result.strides();
  int64_t step = strides[d];
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  const std::vector<Tensor>& ts = a.tensors(0);
  for (size_t i = 0; i < ts.size(); ++i)
    copy_into(alias_with(result, sizes, strides, static_cast<int64_t>(i) * step), ts[i]);
  return one(result);
}

// ---- pad ---------------------------------------------------------------------------------------

namespace {

enum class PadMode { Constant, Reflect, Replicate };

PadMode pad_mode(const std::string& mode) {
  if (mode == "constant") return PadMode::Constant;
  if (mode == "reflect") return PadMode::Reflect;
  if (mode == "replicate") return PadMode::Replicate;
  throw Error("pad: mode \"" + mode +
              "\" is not supported; use \"constant\", \"reflect\" or \"replicate\"");
}

// (left, right) padding of dim d of an ndim tensor; pad lists pairs from the last dim back.
std::pair<int64_t, int64_t> pad_of(const Shape& pad, int64_t d, int64_t ndim) {
  size_t k = static_cast<size_t>(ndim - 1 - d);
  if (2 * k >= pad.size()) return {0, 0};
  return {pad[2 * k], pad[2 * k + 1]};
}

// As torch's reflection/replication pads: the last pad.size()/2 dims, on an input with one
// or two leading (batch, channel) dims; every dim but a leading batch dim must be non-empty.
void check_non_constant_pad(const Tensor& x, const Shape& pad, PadMode mode, double value) {
  const char* name = mode == PadMode::Reflect ? "reflect" : "replicate";
  COIL_CHECK(value == 0, "pad: mode \"", name, "\" takes no fill value, got ", value);
  int64_t k = static_cast<int64_t>(pad.size()) / 2;
  COIL_CHECK(k >= 1 && k <= 3 && (x.dim() == k + 1 || x.dim() == k + 2), "pad: mode \"", name,
             "\" pads the last 1, 2 or 3 dims of a tensor with 1 or 2 more leading dims, but got ",
             pad.size(), " pad values for ", describe(x),
             "; use mode \"constant\" or reshape the input");
  for (int64_t d = x.dim() == k + 2 ? 1 : 0; d < x.dim(); ++d)
    COIL_CHECK(x.sizes()[d] > 0, "pad: mode \"", name, "\" needs non-empty dims (except a batch ",
               "dim) but got ", describe(x));
  for (int64_t d = x.dim() - k; d < x.dim(); ++d) {
    auto [l, r] = pad_of(pad, d, x.dim());
    COIL_CHECK(mode != PadMode::Reflect || (l < x.sizes()[d] && r < x.sizes()[d]),
               "pad: reflect padding (", l, ", ", r, ") of dim ", d, " of ", describe(x),
               " must be smaller than that dim's size ", x.sizes()[d]);
    COIL_CHECK(x.sizes()[d] + l + r >= 1, "pad: padding (", l, ", ", r, ") of dim ", d, " of ",
               describe(x), " leaves no elements");
  }
}

// For each output coordinate j of dim d, the input coordinate it reads, or -1 for the fill
// value. Negative pads crop. Reflect and replicate match torch's index arithmetic.
std::vector<int64_t> pad_source_map(int64_t n, int64_t left, int64_t out_size, PadMode mode) {
  std::vector<int64_t> map(static_cast<size_t>(out_size));
  for (int64_t j = 0; j < out_size; ++j) {
    int64_t x = j - left;
    if (mode == PadMode::Reflect) {
      x = x < 0 ? -x : x >= n ? 2 * (n - 1) - x : x;
    } else if (mode == PadMode::Replicate) {
      x = std::clamp<int64_t>(x, 0, n - 1);
    } else if (x < 0 || x >= n) {
      x = -1;
    }
    map[static_cast<size_t>(j)] = x;
  }
  return map;
}

// out (contiguous) row by row along the last dim: out[j...] = x[map[j]...] or `value`.
template <typename T>
void pad_kernel(const Tensor& x, const Tensor& out, const std::vector<std::vector<int64_t>>& maps,
                T value) {
  const Shape& sz = out.sizes();
  int64_t last = out.dim() - 1, cols = sz[last];
  int64_t rows = out.numel() / cols, in_step = x.strides()[last];
  const T* in = static_cast<const T*>(x.data_ptr());
  T* po = static_cast<T*>(out.data_ptr());
  const std::vector<int64_t>& col_map = maps[last];
  auto row = [&](int64_t r) {
    int64_t rem = r, src = 0;
    bool fill_row = false;
    for (int64_t d = last - 1; d >= 0; --d) {
      int64_t m = maps[d][rem % sz[d]];
      rem /= sz[d];
      fill_row = fill_row || m < 0;
      src += m * x.strides()[d];
    }
    T* o = po + r * cols;
    for (int64_t j = 0; j < cols; ++j) {
      int64_t m = col_map[j];
      o[j] = (fill_row || m < 0) ? value : in[src + m * in_step];
    }
  };
  if (out.numel() >= kParallelGrain) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) row(r);
  } else {
    for (int64_t r = 0; r < rows; ++r) row(r);
  }
}

}  // namespace

std::vector<TensorMeta> meta_pad(const Args& a) {
  const Tensor& x = a.tensor(0);
  const Shape& pad = a.ints(1);
  PadMode mode = pad_mode(a.str(2));
  COIL_CHECK(pad.size() % 2 == 0, "pad: the pad list ", shape_str(pad),
             " must hold (left, right) pairs, so its length must be even");
  COIL_CHECK(static_cast<int64_t>(pad.size()) <= 2 * x.dim(), "pad: ", pad.size(),
             " pad values need at least ", pad.size() / 2, " dims, but the input is ", describe(x));
  if (mode != PadMode::Constant) check_non_constant_pad(x, pad, mode, a.f64(3));
  Shape sizes = x.sizes();
  for (int64_t d = 0; d < x.dim(); ++d) {
    auto [l, r] = pad_of(pad, d, x.dim());
    sizes[d] += l + r;
    COIL_CHECK(sizes[d] >= 0, "pad: padding (", l, ", ", r, ") of dim ", d, " of ", describe(x),
               " gives a negative size ", sizes[d]);
  }
  return one(contiguous_meta(x.dtype(), sizes, x.device()));
}

std::vector<Tensor> eager_pad(const Args& a, const std::vector<TensorMeta>& out) {
  const Tensor& x = a.tensor(0);
  Tensor result = empty_from_meta(out[0]);
  if (result.numel() == 0) return one(result);
  if (x.dim() == 0) {
    copy_into(result, x);
    return one(result);
  }
  PadMode mode = pad_mode(a.str(2));
  std::vector<std::vector<int64_t>> maps;
  for (int64_t d = 0; d < x.dim(); ++d)
    maps.push_back(
        pad_source_map(x.sizes()[d], pad_of(a.ints(1), d, x.dim()).first, result.sizes()[d], mode));
  double value = a.f64(3);
  dispatch_dtype(x.dtype(),
                 [&]<typename T>() { pad_kernel<T>(x, result, maps, Scalar(value).to<T>()); });
  return one(result);
}

// ---- repeat, flip
// --------------------------------------------------------------------------------

std::vector<TensorMeta> meta_repeat(const Args& a) {
  const Tensor& x = a.tensor(0);
  const Shape& reps = a.ints(1);
  COIL_CHECK(static_cast<int64_t>(reps.size()) >= x.dim(), "repeat: ", shape_str(reps),
             " has fewer entries than ", describe(x), " has dims; give one per dim (or more)");
  size_t lead = reps.size() - static_cast<size_t>(x.dim());
  Shape sizes(reps.size());
  for (size_t i = 0; i < reps.size(); ++i) {
    COIL_CHECK(reps[i] >= 0, "repeat: negative repeat count in ", shape_str(reps));
    sizes[i] = reps[i] * (i < lead ? 1 : x.sizes()[i - lead]);
  }
  return one(contiguous_meta(x.dtype(), sizes, x.device()));
}

// The output seen as [r0, s0, r1, s1, ...] (each dim split into repeats x input size) and the
// input broadcast to it with stride 0 over the repeats: one strided copy.
std::vector<Tensor> eager_repeat(const Args& a, const std::vector<TensorMeta>& out) {
  const Tensor& x = a.tensor(0);
  const Shape& reps = a.ints(1);
  Tensor result = empty_from_meta(out[0]);
  if (result.numel() == 0) return one(result);
  size_t lead = reps.size() - static_cast<size_t>(x.dim());
  Shape dst_sizes, dst_strides, src_sizes, src_strides;
  for (size_t i = 0; i < reps.size(); ++i) {
    int64_t s = i < lead ? 1 : x.sizes()[i - lead];
    int64_t st = i < lead ? 0 : x.strides()[i - lead];
    dst_sizes.insert(dst_sizes.end(), {reps[i], s});
    dst_strides.insert(dst_strides.end(), {s * result.strides()[i], result.strides()[i]});
    src_strides.insert(src_strides.end(), {0, st});
  }
  copy_into(alias_with(result, dst_sizes, dst_strides, 0),
            alias_with(x, dst_sizes, src_strides, x.storage_offset()));
  return one(result);
}

std::vector<TensorMeta> meta_flip(const Args& a) {
  const Tensor& x = a.tensor(0);
  if (!a.ints(1).empty()) wrap_dims(a.ints(1), x.dim(), "flip");  // validates; {} flips nothing
  return one(contiguous_meta(x.dtype(), x.sizes(), x.device()));
}

// A copy from the input read backwards: an internal view with negative strides along the
// flipped dims, starting at their last element (such views never leave this kernel).
std::vector<Tensor> eager_flip(const Args& a, const std::vector<TensorMeta>& out) {
  const Tensor& x = a.tensor(0);
  Tensor result = empty_from_meta(out[0]);
  if (result.numel() == 0) return one(result);
  Shape strides = x.strides();
  int64_t offset = x.storage_offset();
  if (!a.ints(1).empty() && x.dim() > 0) {
    for (int64_t d : wrap_dims(a.ints(1), x.dim(), "flip")) {
      offset += (x.sizes()[d] - 1) * strides[d];
      strides[d] = -strides[d];
    }
  }
  copy_into(result, alias_with(x, x.sizes(), strides, offset));
  return one(result);
}

// ---- tril, triu
// ----------------------------------------------------------------------------------

namespace {

TensorMeta triangle_meta(const Args& a, const char* op) {
  const Tensor& x = a.tensor(0);
  COIL_CHECK(x.dim() >= 2, op, ": expects a tensor with at least 2 dims (a matrix or a batch of ",
             "them), got ", describe(x));
  return contiguous_meta(x.dtype(), x.sizes(), x.device());
}

// Copies the input, then zeroes, in each row i of each matrix, the columns outside the kept
// triangle: for tril those with j - i > diagonal, for triu those with j - i < diagonal.
Tensor triangle(const Args& a, const TensorMeta& meta, bool lower) {
  Tensor result = empty_from_meta(meta);
  if (result.numel() == 0) return result;
  copy_into(result, a.tensor(0));
  int64_t diagonal = a.i64(1);
  int64_t rows = result.sizes()[result.dim() - 2], cols = result.sizes()[result.dim() - 1];
  int64_t all_rows = result.numel() / cols;
  dispatch_dtype(result.dtype(), [&]<typename T>() {
    T* p = static_cast<T*>(result.data_ptr());
    auto row = [&](int64_t r) {
      int64_t i = r % rows;
      // Columns [lo, hi) are zeroed; the bounds are clamped to the row.
      int64_t lo = lower ? std::clamp<int64_t>(i + diagonal + 1, 0, cols) : 0;
      int64_t hi = lower ? cols : std::clamp<int64_t>(i + diagonal, 0, cols);
      std::fill(p + r * cols + lo, p + r * cols + hi, T(0));
    };
    if (result.numel() >= kParallelGrain) {
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < all_rows; ++r) row(r);
    } else {
      for (int64_t r = 0; r < all_rows; ++r) row(r);
    }
  });
  return result;
}

}  // namespace

std::vector<TensorMeta> meta_tril(const Args& a) { return one(triangle_meta(a, "tril")); }
std::vector<Tensor> eager_tril(const Args& a, const std::vector<TensorMeta>& out) {
  return one(triangle(a, out[0], true));
}
std::vector<TensorMeta> meta_triu(const Args& a) { return one(triangle_meta(a, "triu")); }
std::vector<Tensor> eager_triu(const Args& a, const std::vector<TensorMeta>& out) {
  return one(triangle(a, out[0], false));
}

}  // namespace coil::ops
