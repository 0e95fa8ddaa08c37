// View ops: new sizes/strides/offset over the same storage. The meta function computes the
// geometry; the kernel only wraps the input's storage with it.
#include <algorithm>
#include <numeric>

#include "ops/meta_util.h"

namespace coil::ops {

namespace {

TensorMeta geometry(const Tensor& x, Shape sizes, Shape strides, int64_t offset) {
  return TensorMeta{x.dtype(), std::move(sizes), std::move(strides), offset, x.device()};
}

std::vector<Tensor> alias_outputs(const Tensor& x, const std::vector<TensorMeta>& out) {
  std::vector<Tensor> views;
  for (const auto& m : out) views.push_back(alias_with(x, m.sizes, m.strides, m.offset));
  return views;
}

// Resolves a single -1 in `shape` so that it holds `numel` elements.
Shape infer_size(const Shape& shape, int64_t numel, const char* op) {
  Shape out = shape;
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      COIL_CHECK(infer_at < 0, op, ": only one dimension can be -1 in ", shape_str(shape));
      infer_at = static_cast<int64_t>(i);
    } else {
      COIL_CHECK(out[i] >= 0, op, ": invalid size ", out[i], " in ", shape_str(shape));
      known *= out[i];
    }
  }
  if (infer_at >= 0) {
    COIL_CHECK(known != 0 && numel % known == 0, op, ": shape ", shape_str(shape),
               " is invalid for an input of ", numel, " elements");
    out[infer_at] = numel / known;
  } else {
    COIL_CHECK(known == numel, op, ": shape ", shape_str(shape), " is invalid for an input of ",
               numel, " elements");
  }
  return out;
}

}  // namespace

namespace {

// reshape/flatten: a view when the layout allows, else a contiguous copy.
TensorMeta reshape_meta(const Tensor& x, const Shape& shape, const char* op) {
  Shape sizes = infer_size(shape, x.numel(), op);
  if (auto st = view_strides(x.sizes(), x.strides(), sizes))
    return geometry(x, sizes, *st, x.storage_offset());
  return contiguous_meta(x.dtype(), sizes, x.device());
}
Tensor reshape_eager(const Tensor& x, const TensorMeta& m) {
  if (view_strides(x.sizes(), x.strides(), m.sizes))
    return alias_with(x, m.sizes, m.strides, m.offset);
  Tensor copy = contiguous_copy(x);
  return alias_with(copy, m.sizes, m.strides, 0);
}

}  // namespace

#define COIL_VIEW_KERNEL(name)                                                          \
  std::vector<Tensor> eager_##name(const Args& a, const std::vector<TensorMeta>& out) { \
    return alias_outputs(a.tensor(0), out);                                             \
  }

std::vector<TensorMeta> meta_view(const Args& a) {
  const Tensor& x = a.tensor(0);
  Shape sizes = infer_size(a.ints(1), x.numel(), "view");
  auto st = view_strides(x.sizes(), x.strides(), sizes);
  COIL_CHECK(st.has_value(), "view: cannot view ", describe(x), " with strides ",
             shape_str(x.strides()), " as ", shape_str(sizes),
             " (the new shape would span non-contiguous memory); use .reshape(...) instead");
  return one(geometry(x, sizes, *st, x.storage_offset()));
}
COIL_VIEW_KERNEL(view)

std::vector<TensorMeta> meta_reshape(const Args& a) {
  return one(reshape_meta(a.tensor(0), a.ints(1), "reshape"));
}
std::vector<Tensor> eager_reshape(const Args& a, const std::vector<TensorMeta>& out) {
  return one(reshape_eager(a.tensor(0), out[0]));
}

std::vector<TensorMeta> meta_flatten(const Args& a) {
  const Tensor& x = a.tensor(0);
  if (x.dim() == 0) {
    wrap_dim(a.i64(1), 0, "flatten");
    wrap_dim(a.i64(2), 0, "flatten");
    return one(geometry(x, {1}, {1}, x.storage_offset()));
  }
  int64_t s = wrap_dim(a.i64(1), x.dim(), "flatten"), e = wrap_dim(a.i64(2), x.dim(), "flatten");
  COIL_CHECK(s <= e, "flatten: start_dim ", a.i64(1), " comes after end_dim ", a.i64(2), " for ",
             describe(x));
  Shape shape(x.sizes().begin(), x.sizes().begin() + s);
  int64_t n = 1;
  for (int64_t d = s; d <= e; ++d) n *= x.sizes()[d];
  shape.push_back(n);
  shape.insert(shape.end(), x.sizes().begin() + e + 1, x.sizes().end());
  return one(reshape_meta(x, shape, "flatten"));
}
std::vector<Tensor> eager_flatten(const Args& a, const std::vector<TensorMeta>& out) {
  return one(reshape_eager(a.tensor(0), out[0]));
}

std::vector<TensorMeta> meta_unflatten(const Args& a) {
  const Tensor& x = a.tensor(0);
  COIL_CHECK(x.dim() > 0, "unflatten: cannot unflatten a 0-dim tensor");
  int64_t d = wrap_dim(a.i64(1), x.dim(), "unflatten");
  COIL_CHECK(!a.ints(2).empty(), "unflatten: sizes must not be empty");
  Shape inner = infer_size(a.ints(2), x.sizes()[d], "unflatten");
  Shape sizes(x.sizes().begin(), x.sizes().begin() + d),
      strides(x.strides().begin(), x.strides().begin() + d);
  Shape inner_strides = contiguous_strides(inner);
  for (size_t i = 0; i < inner.size(); ++i) {
    sizes.push_back(inner[i]);
    strides.push_back(inner_strides[i] * x.strides()[d]);
  }
  sizes.insert(sizes.end(), x.sizes().begin() + d + 1, x.sizes().end());
  strides.insert(strides.end(), x.strides().begin() + d + 1, x.strides().end());
  return one(geometry(x, sizes, strides, x.storage_offset()));
}
COIL_VIEW_KERNEL(unflatten)

std::vector<TensorMeta> meta_permute(const Args& a) {
  const Tensor& x = a.tensor(0);
  const Shape& dims = a.ints(1);
  COIL_CHECK(static_cast<int64_t>(dims.size()) == x.dim(), "permute: got ", dims.size(), " dims ",
             shape_str(dims), " for ", describe(x), "; give one entry per dim");
  Shape sizes, strides;
  std::vector<bool> seen(static_cast<size_t>(x.dim()), false);
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, x.dim(), "permute");
    COIL_CHECK(!seen[w], "permute: dim ", d, " repeats in ", shape_str(dims));
    seen[w] = true;
    sizes.push_back(x.sizes()[w]);
    strides.push_back(x.strides()[w]);
  }
  return one(geometry(x, sizes, strides, x.storage_offset()));
}
COIL_VIEW_KERNEL(permute)

std::vector<TensorMeta> meta_transpose(const Args& a) {
  const Tensor& x = a.tensor(0);
  if (x.dim() == 0) {
    wrap_dim(a.i64(1), 0, "transpose");
    wrap_dim(a.i64(2), 0, "transpose");
    return one(meta_of(x));
  }
  int64_t d0 = wrap_dim(a.i64(1), x.dim(), "transpose"),
          d1 = wrap_dim(a.i64(2), x.dim(), "transpose");
  Shape sizes = x.sizes(), strides = x.strides();
  std::swap(sizes[d0], sizes[d1]);
  std::swap(strides[d0], strides[d1]);
  return one(geometry(x, sizes, strides, x.storage_offset()));
}
COIL_VIEW_KERNEL(transpose)

std::vector<TensorMeta> meta_t(const Args& a) {
  const Tensor& x = a.tensor(0);
  COIL_CHECK(x.dim() <= 2, "t: expects a tensor with at most 2 dims, got ", describe(x),
             "; use transpose(dim0, dim1) or permute for more");
  if (x.dim() < 2) return one(meta_of(x));
  return one(geometry(x, {x.sizes()[1], x.sizes()[0]}, {x.strides()[1], x.strides()[0]},
                      x.storage_offset()));
}
COIL_VIEW_KERNEL(t)

std::vector<TensorMeta> meta_expand(const Args& a) {
  const Tensor& x = a.tensor(0);
  const Shape& size = a.ints(1);
  COIL_CHECK(static_cast<int64_t>(size.size()) >= x.dim(), "expand: the target ", shape_str(size),
             " has fewer dims than ", describe(x));
  size_t lead = size.size() - static_cast<size_t>(x.dim());
  Shape sizes(size.size()), strides(size.size());
  for (size_t i = 0; i < size.size(); ++i) {
    if (i < lead) {
      COIL_CHECK(size[i] >= 0, "expand: a new leading dim cannot be ", size[i], " in ",
                 shape_str(size));
      sizes[i] = size[i];
      strides[i] = 0;
      continue;
    }
    int64_t have = x.sizes()[i - lead];
    int64_t want = size[i] == -1 ? have : size[i];
    COIL_CHECK(want >= 0, "expand: invalid target size ", size[i], " in ", shape_str(size),
               " (-1 keeps a dim's size)");
    COIL_CHECK(want == have || have == 1, "expand: cannot expand ", describe(x), " to ",
               shape_str(size), " (dim ", i, ": ", have, " -> ", want,
               "); only size-1 dims can grow");
    sizes[i] = want;
    strides[i] = (have == 1 && want != 1) ? 0 : x.strides()[i - lead];
  }
  return one(geometry(x, sizes, strides, x.storage_offset()));
}
COIL_VIEW_KERNEL(expand)

std::vector<TensorMeta> meta_squeeze(const Args& a) {
  const Tensor& x = a.tensor(0);
  std::vector<bool> drop(static_cast<size_t>(x.dim()), false);
  if (auto dims = a.opt_ints(1)) {
    for (int64_t d : *dims) {
      if (x.dim() == 0) {
        wrap_dim(d, 0, "squeeze");
        continue;
      }
      int64_t w = wrap_dim(d, x.dim(), "squeeze");
      drop[w] = x.sizes()[w] == 1;
    }
  } else {
    for (int64_t d = 0; d < x.dim(); ++d) drop[d] = x.sizes()[d] == 1;
  }
  Shape sizes, strides;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (drop[d]) continue;
    sizes.push_back(x.sizes()[d]);
    strides.push_back(x.strides()[d]);
  }
  return one(geometry(x, sizes, strides, x.storage_offset()));
}
COIL_VIEW_KERNEL(squeeze)

std::vector<TensorMeta> meta_unsqueeze(const Args& a) {
  const Tensor& x = a.tensor(0);
  int64_t d = wrap_dim(a.i64(1), x.dim() + 1, "unsqueeze");
  Shape sizes = x.sizes(), strides = x.strides();
  int64_t st = d < x.dim() ? x.sizes()[d] * x.strides()[d] : 1;
  sizes.insert(sizes.begin() + d, 1);
  strides.insert(strides.begin() + d, st);
  return one(geometry(x, sizes, strides, x.storage_offset()));
}
COIL_VIEW_KERNEL(unsqueeze)

namespace {
TensorMeta slice_meta(const Tensor& x, int64_t dim, std::optional<int64_t> start_opt,
                      std::optional<int64_t> end_opt, int64_t step, const char* op) {
  COIL_CHECK(x.dim() > 0, op, ": cannot slice a 0-dim tensor ", describe(x));
  int64_t d = wrap_dim(dim, x.dim(), op);
  COIL_CHECK(step > 0, op, ": step must be positive, got ", step, " (use flip to reverse)");
  int64_t n = x.sizes()[d];
  auto clampi = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
  int64_t start = start_opt ? clampi(*start_opt) : 0;
  int64_t end = end_opt ? clampi(*end_opt) : n;
  int64_t len = end > start ? (end - start + step - 1) / step : 0;
  Shape sizes = x.sizes(), strides = x.strides();
  sizes[d] = len;
  strides[d] = x.strides()[d] * step;
  return geometry(x, sizes, strides, x.storage_offset() + start * x.strides()[d]);
}
}  // namespace

std::vector<TensorMeta> meta_slice(const Args& a) {
  return one(slice_meta(a.tensor(0), a.i64(1), a.opt_i64(2), a.opt_i64(3), a.i64(4), "slice"));
}
COIL_VIEW_KERNEL(slice)

std::vector<TensorMeta> meta_narrow(const Args& a) {
  const Tensor& x = a.tensor(0);
  COIL_CHECK(x.dim() > 0, "narrow: cannot narrow a 0-dim tensor");
  int64_t d = wrap_dim(a.i64(1), x.dim(), "narrow");
  int64_t n = x.sizes()[d], start = a.i64(2), length = a.i64(3);
  if (start < 0) start += n;
  COIL_CHECK(start >= 0 && length >= 0 && start + length <= n, "narrow: start ", a.i64(2),
             " and length ", length, " are out of range for dim ", d, " of ", describe(x));
  return one(slice_meta(x, d, start, start + length, 1, "narrow"));
}
COIL_VIEW_KERNEL(narrow)

std::vector<TensorMeta> meta_select(const Args& a) {
  const Tensor& x = a.tensor(0);
  COIL_CHECK(x.dim() > 0, "select: cannot select from a 0-dim tensor");
  int64_t d = wrap_dim(a.i64(1), x.dim(), "select");
  int64_t n = x.sizes()[d], i = a.i64(2);
  COIL_CHECK(i >= -n && i < n, "select: index ", i, " is out of range for dim ", d, " of ",
             describe(x), " (size ", n, ")");
  if (i < 0) i += n;
  Shape sizes = x.sizes(), strides = x.strides();
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  return one(geometry(x, sizes, strides, x.storage_offset() + i * x.strides()[d]));
}
COIL_VIEW_KERNEL(select)

std::vector<TensorMeta> meta_as_strided(const Args& a) {
  const Tensor& x = a.tensor(0);
  const Shape &sizes = a.ints(1), &strides = a.ints(2);
  COIL_CHECK(sizes.size() == strides.size(), "as_strided: sizes ", shape_str(sizes),
             " and strides ", shape_str(strides), " must have the same length");
  int64_t offset = a.opt_i64(3).value_or(x.storage_offset());
  int64_t last = offset;
  for (size_t i = 0; i < sizes.size(); ++i) {
    COIL_CHECK(sizes[i] >= 0 && strides[i] >= 0, "as_strided: negative size or stride in ",
               shape_str(sizes), " / ", shape_str(strides));
    if (sizes[i] == 0) last = -1;
    if (last >= 0) last += (sizes[i] - 1) * strides[i];
  }
  COIL_CHECK(offset >= 0, "as_strided: negative storage offset ", offset);
  if (x.has_storage() && last >= 0) {
    int64_t capacity = static_cast<int64_t>(x.impl()->storage->nbytes / x.element_size());
    COIL_CHECK(last < capacity, "as_strided: sizes ", shape_str(sizes), ", strides ",
               shape_str(strides), " and offset ", offset, " reach element ", last,
               " but the storage holds ", capacity);
  }
  return one(geometry(x, sizes, strides, offset));
}
COIL_VIEW_KERNEL(as_strided)

// ---- splitting: several views --------------------------------------------------------------

namespace {
std::vector<TensorMeta> split_metas(const Tensor& x, const Shape& sizes, int64_t dim,
                                    const char* op) {
  COIL_CHECK(x.dim() > 0, op, ": cannot split a 0-dim tensor");
  int64_t d = wrap_dim(dim, x.dim(), op);
  int64_t total = 0;
  for (int64_t s : sizes) {
    COIL_CHECK(s >= 0, op, ": negative split size in ", shape_str(sizes));
    total += s;
  }
  COIL_CHECK(total == x.sizes()[d], op, ": split sizes ", shape_str(sizes), " add up to ", total,
             " but dim ", d, " of ", describe(x), " has ", x.sizes()[d]);
  std::vector<TensorMeta> out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(slice_meta(x, d, start, start + s, 1, op));
    start += s;
  }
  return out;
}
Shape even_splits(int64_t n, int64_t piece) {
  Shape sizes;
  for (int64_t start = 0; start < n; start += piece) sizes.push_back(std::min(piece, n - start));
  if (sizes.empty()) sizes.push_back(0);
  return sizes;
}
}  // namespace

std::vector<TensorMeta> meta_split(const Args& a) {
  const Tensor& x = a.tensor(0);
  COIL_CHECK(x.dim() > 0, "split: cannot split a 0-dim tensor");
  int64_t d = wrap_dim(a.i64(2), x.dim(), "split");
  COIL_CHECK(a.i64(1) > 0 || (a.i64(1) == 0 && x.sizes()[d] == 0),
             "split: split_size must be positive, got ", a.i64(1));
  return split_metas(x, even_splits(x.size(d), std::max<int64_t>(a.i64(1), 1)), d, "split");
}
COIL_VIEW_KERNEL(split)

std::vector<TensorMeta> meta_split_with_sizes(const Args& a) {
  return split_metas(a.tensor(0), a.ints(1), a.i64(2), "split_with_sizes");
}
COIL_VIEW_KERNEL(split_with_sizes)

std::vector<TensorMeta> meta_chunk(const Args& a) {
  const Tensor& x = a.tensor(0);
  int64_t chunks = a.i64(1);
  COIL_CHECK(chunks > 0, "chunk: chunks must be positive, got ", chunks);
  COIL_CHECK(x.dim() > 0, "chunk: cannot chunk a 0-dim tensor");
  int64_t d = wrap_dim(a.i64(2), x.dim(), "chunk");
  if (x.sizes()[d] == 0) return split_metas(x, Shape(static_cast<size_t>(chunks), 0), d, "chunk");
  int64_t piece = (x.sizes()[d] + chunks - 1) / chunks;
  return split_metas(x, even_splits(x.sizes()[d], std::max<int64_t>(piece, 1)), d, "chunk");
}
COIL_VIEW_KERNEL(chunk)

#undef COIL_VIEW_KERNEL

}  // namespace coil::ops
