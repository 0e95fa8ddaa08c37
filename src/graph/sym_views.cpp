// The view ops' symbolic rules: sizes, strides and storage offset over the input's, as the
// meta functions of ops/view.cpp compute them on numbers.
#include <algorithm>

#include <coil/error.h>

#include "graph/dims.h"
#include "graph/sym_rules.h"

namespace coil::detail_sym {

namespace {

using sym::Expr;
using Layouts = std::vector<SymLayout>;

Layouts one(SymLayout l) { return {std::move(l)}; }
int64_t ndim(const SymLayout& l) { return static_cast<int64_t>(l.sizes.size()); }
size_t wrap(int64_t d, int64_t nd, const char* op) {
  return static_cast<size_t>(wrap_dim(d, nd, op));
}

// A single -1 in `shape` resolved so that it holds `numel` elements (guarded divisible).
SymShape infer_size(const SymCall& c, SymShape shape, Expr numel) {
  Expr known = sym::constant(1);
  int infer_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i]->is_const(-1))
      infer_at = static_cast<int>(i);
    else
      known = known * shape[i];
  }
  if (infer_at < 0) {
    c.eq(known, numel);
    return shape;
  }
  Expr q = known->is_const() ? sym::floordiv(numel, known->value()) : sym::floordiv(numel, known);
  if (c.simplify(q * known) != c.simplify(numel)) c.eq(q * known, numel);
  shape[static_cast<size_t>(infer_at)] = q;
  return shape;
}

// PyTorch's computeStride over expressions (graph/dims.h's view_strides on numbers): the chunk
// boundaries are where the hints put them, each comparison guarded.
std::optional<SymShape> view_strides(const SymCall& c, const SymShape& old_shape,
                                     const SymShape& old_strides, const SymShape& new_shape) {
  SymShape strides(new_shape.size());
  if (old_shape.empty() || sym_numel(old_shape)->is_const(0))
    return sym_contiguous_strides(new_shape);
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  Expr chunk_base = old_strides.back(), tensor_numel = sym::constant(1),
       view_numel = sym::constant(1);
  for (int64_t d = static_cast<int64_t>(old_shape.size()) - 1; d >= 0; --d) {
    tensor_numel = tensor_numel * old_shape[static_cast<size_t>(d)];
    if (d == 0 || (!old_shape[static_cast<size_t>(d - 1)]->is_const(1) &&
                   !c.eq(old_strides[static_cast<size_t>(d - 1)], tensor_numel * chunk_base))) {
      while (view_d >= 0 && (c.lt(view_numel, tensor_numel) ||
                             new_shape[static_cast<size_t>(view_d)]->is_const(1))) {
        strides[static_cast<size_t>(view_d)] = view_numel * chunk_base;
        view_numel = view_numel * new_shape[static_cast<size_t>(view_d)];
        --view_d;
      }
      if (!c.eq(view_numel, tensor_numel)) return std::nullopt;
      if (d > 0) {
        chunk_base = old_strides[static_cast<size_t>(d - 1)];
        tensor_numel = view_numel = sym::constant(1);
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  for (Expr& e : strides) e = c.simplify(e);
  return strides;
}

// view and the reshape family: a view when the strides allow it (view requires it), else a
// contiguous copy.
SymLayout reshape_to(const SymCall& c, const SymLayout& x, const SymShape& shape) {
  SymShape sizes = infer_size(c, shape, sym_numel(x.sizes));
  if (auto st = view_strides(c, x.sizes, x.strides, sizes)) return SymLayout{sizes, *st, x.offset};
  return SymLayout::contiguous(sizes);
}

Layouts view(const SymCall& c) { return one(reshape_to(c, c.layout(0), c.ints(1))); }

Layouts flatten(const SymCall& c) {
  SymLayout x = c.layout(0);
  if (x.sizes.empty()) return one(SymLayout{{sym::constant(1)}, {sym::constant(1)}, x.offset});
  size_t s = wrap(c.plain_int(1), ndim(x), "flatten"), e = wrap(c.plain_int(2), ndim(x), "flatten");
  SymShape shape(x.sizes.begin(), x.sizes.begin() + static_cast<std::ptrdiff_t>(s));
  Expr n = sym::constant(1);
  for (size_t d = s; d <= e; ++d) n = n * x.sizes[d];
  shape.push_back(n);
  shape.insert(shape.end(), x.sizes.begin() + static_cast<std::ptrdiff_t>(e) + 1, x.sizes.end());
  return one(reshape_to(c, x, shape));
}

Layouts unflatten(const SymCall& c) {
  SymLayout x = c.layout(0);
  size_t d = wrap(c.plain_int(1), ndim(x), "unflatten");
  SymShape inner = infer_size(c, c.ints(2), x.sizes[d]);
  SymShape inner_strides = sym_contiguous_strides(inner);
  SymLayout out{SymShape(x.sizes.begin(), x.sizes.begin() + static_cast<std::ptrdiff_t>(d)),
                SymShape(x.strides.begin(), x.strides.begin() + static_cast<std::ptrdiff_t>(d)),
                x.offset};
  for (size_t i = 0; i < inner.size(); ++i) {
    out.sizes.push_back(inner[i]);
    out.strides.push_back(inner_strides[i] * x.strides[d]);
  }
  out.sizes.insert(out.sizes.end(), x.sizes.begin() + static_cast<std::ptrdiff_t>(d) + 1,
                   x.sizes.end());
  out.strides.insert(out.strides.end(), x.strides.begin() + static_cast<std::ptrdiff_t>(d) + 1,
                     x.strides.end());
  return one(out);
}

Layouts permute(const SymCall& c) {
  SymLayout x = c.layout(0);
  const Shape dims = std::get<Shape>(c.args()[1]);
  SymLayout out{{}, {}, x.offset};
  for (int64_t d : dims) {
    size_t w = wrap(d, ndim(x), "permute");
    out.sizes.push_back(x.sizes[w]);
    out.strides.push_back(x.strides[w]);
  }
  return one(out);
}

Layouts transpose(const SymCall& c) {
  SymLayout x = c.layout(0);
  if (x.sizes.empty()) return one(x);
  size_t a = wrap(c.plain_int(1), ndim(x), "transpose"),
         b = wrap(c.plain_int(2), ndim(x), "transpose");
  std::swap(x.sizes[a], x.sizes[b]);
  std::swap(x.strides[a], x.strides[b]);
  return one(x);
}

Layouts t(const SymCall& c) {
  SymLayout x = c.layout(0);
  if (x.sizes.size() == 2) {
    std::swap(x.sizes[0], x.sizes[1]);
    std::swap(x.strides[0], x.strides[1]);
  }
  return one(x);
}

Layouts expand(const SymCall& c) {
  SymLayout x = c.layout(0);
  SymShape size = c.ints(1);
  const size_t lead = size.size() - x.sizes.size();
  SymLayout out{SymShape(size.size()), SymShape(size.size()), x.offset};
  for (size_t i = 0; i < size.size(); ++i) {
    if (i < lead) {
      out.sizes[i] = size[i];
      out.strides[i] = sym::constant(0);
      continue;
    }
    Expr have = x.sizes[i - lead];
    Expr want = size[i]->is_const(-1) ? have : size[i];
    const bool grows = have->is_const(1) && !want->is_const(1);
    if (!grows) c.eq(want, have);
    out.sizes[i] = c.simplify(want);
    out.strides[i] = grows ? sym::constant(0) : x.strides[i - lead];
  }
  return one(out);
}

// Only size-1 dims go, and sizes 1 are never symbolic.
Layouts squeeze(const SymCall& c) {
  SymLayout x = c.layout(0);
  std::vector<bool> drop(x.sizes.size(), false);
  if (c.has(1)) {
    for (int64_t d : std::get<Shape>(c.args()[1]))
      if (!x.sizes.empty()) {
        size_t w = wrap(d, ndim(x), "squeeze");
        drop[w] = x.sizes[w]->is_const(1);
      }
  } else {
    for (size_t d = 0; d < x.sizes.size(); ++d) drop[d] = x.sizes[d]->is_const(1);
  }
  SymLayout out{{}, {}, x.offset};
  for (size_t d = 0; d < x.sizes.size(); ++d) {
    if (drop[d]) continue;
    out.sizes.push_back(x.sizes[d]);
    out.strides.push_back(x.strides[d]);
  }
  return one(out);
}

Layouts unsqueeze(const SymCall& c) {
  SymLayout x = c.layout(0);
  size_t d = wrap(c.plain_int(1), ndim(x) + 1, "unsqueeze");
  Expr st = d < x.sizes.size() ? x.sizes[d] * x.strides[d] : sym::constant(1);
  x.sizes.insert(x.sizes.begin() + static_cast<std::ptrdiff_t>(d), sym::constant(1));
  x.strides.insert(x.strides.begin() + static_cast<std::ptrdiff_t>(d), st);
  return one(x);
}

// Python's slice bound: negative counts from the end, then clamped into [0, n].
Expr clamp_bound(const SymCall& c, Expr v, Expr n) {
  if (c.lt(v, sym::constant(0))) v = v + n;
  if (c.lt(v, sym::constant(0))) return sym::constant(0);
  return c.le(v, n) ? v : n;
}

SymLayout slice_of(const SymCall& c, const SymLayout& x, size_t d, std::optional<Expr> start,
                   std::optional<Expr> end, int64_t step) {
  Expr n = x.sizes[d];
  Expr s = start ? clamp_bound(c, *start, n) : sym::constant(0);
  Expr e = end ? clamp_bound(c, *end, n) : n;
  Expr len = c.lt(s, e) ? sym::floordiv(e - s + (step - 1), step) : sym::constant(0);
  SymLayout out = x;
  out.sizes[d] = c.simplify(len);
  out.strides[d] = x.strides[d] * step;
  out.offset = c.simplify(x.offset + s * x.strides[d]);
  return out;
}

std::optional<Expr> opt_int(const SymCall& c, size_t i) {
  return c.has(i) ? std::optional<Expr>(c.int_arg(i)) : std::nullopt;
}

Layouts slice(const SymCall& c) {
  SymLayout x = c.layout(0);
  size_t d = wrap(c.plain_int(1), ndim(x), "slice");
  return one(slice_of(c, x, d, opt_int(c, 2), opt_int(c, 3), c.plain_int(4)));
}

Layouts narrow(const SymCall& c) {
  SymLayout x = c.layout(0);
  size_t d = wrap(c.plain_int(1), ndim(x), "narrow");
  Expr start = c.int_arg(2), length = c.int_arg(3);
  if (c.lt(start, sym::constant(0))) start = start + x.sizes[d];
  c.le(start + length, x.sizes[d]);
  return one(slice_of(c, x, d, start, start + length, 1));
}

Layouts select(const SymCall& c) {
  SymLayout x = c.layout(0);
  size_t d = wrap(c.plain_int(1), ndim(x), "select");
  Expr i = c.int_arg(2);
  if (c.lt(i, sym::constant(0))) i = i + x.sizes[d];
  c.lt(i, x.sizes[d]);
  SymLayout out{{}, {}, c.simplify(x.offset + i * x.strides[d])};
  for (size_t k = 0; k < x.sizes.size(); ++k) {
    if (k == d) continue;
    out.sizes.push_back(x.sizes[k]);
    out.strides.push_back(x.strides[k]);
  }
  return one(out);
}

Layouts as_strided(const SymCall& c) {
  SymLayout x = c.layout(0);
  return one(SymLayout{c.ints(1), c.ints(2), c.has(3) ? c.int_arg(3) : x.offset});
}

// Consecutive slices of `sizes` along dim d; they must add up to the dim.
Layouts split_into(const SymCall& c, const SymLayout& x, size_t d, const SymShape& sizes) {
  Expr total = sym::constant(0);
  for (Expr s : sizes) total = total + s;
  c.eq(total, x.sizes[d]);
  Layouts out;
  Expr start = sym::constant(0);
  for (Expr s : sizes) {
    out.push_back(slice_of(c, x, d, start, start + s, 1));
    start = start + s;
  }
  return out;
}

// split and chunk make as many pieces as the dim's size asks for: a number, so the size is
// specialised (split_with_sizes keeps symbolic sizes).
Layouts even_split(const SymCall& c, size_t d, int64_t piece_of_n(int64_t n, int64_t arg)) {
  SymLayout x = c.layout(0);
  const int64_t n = c.guard_int(x.sizes[d]);
  x = SymLayout{c.simplify(x.sizes), c.simplify(x.strides), c.simplify(x.offset)};
  const int64_t arg = c.plain_int(1);
  SymShape sizes;
  if (c.op() == OpId::chunk && n == 0) {
    sizes.assign(static_cast<size_t>(arg), sym::constant(0));
  } else {
    const int64_t piece = std::max<int64_t>(piece_of_n(n, arg), 1);
    for (int64_t s = 0; s < n; s += piece) sizes.push_back(sym::constant(std::min(piece, n - s)));
    if (sizes.empty()) sizes.push_back(sym::constant(0));
  }
  return split_into(c, x, d, sizes);
}

Layouts split(const SymCall& c) {
  return even_split(c, wrap(c.plain_int(2), ndim(c.layout(0)), "split"),
                    [](int64_t, int64_t size) { return size; });
}

Layouts chunk(const SymCall& c) {
  return even_split(c, wrap(c.plain_int(2), ndim(c.layout(0)), "chunk"),
                    [](int64_t n, int64_t chunks) { return (n + chunks - 1) / chunks; });
}

Layouts split_with_sizes(const SymCall& c) {
  SymLayout x = c.layout(0);
  return split_into(c, x, wrap(c.plain_int(2), ndim(x), "split_with_sizes"), c.ints(1));
}

}  // namespace

void register_view_rules(std::vector<std::pair<OpId, Rule>>& rules) {
  rules.insert(rules.end(), {
                                {OpId::view, view},
                                {OpId::reshape, view},
                                {OpId::flatten, flatten},
                                {OpId::unflatten, unflatten},
                                {OpId::permute, permute},
                                {OpId::transpose, transpose},
                                {OpId::t, t},
                                {OpId::expand, expand},
                                {OpId::squeeze, squeeze},
                                {OpId::unsqueeze, unsqueeze},
                                {OpId::slice, slice},
                                {OpId::narrow, narrow},
                                {OpId::select, select},
                                {OpId::as_strided, as_strided},
                                {OpId::split, split},
                                {OpId::split_with_sizes, split_with_sizes},
                                {OpId::chunk, chunk},
                            });
}

}  // namespace coil::detail_sym
