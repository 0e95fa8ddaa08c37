// Derivatives of views and shape ops: each gradient is the inverse index transform of the
// output's gradient (a reshape back, the inverse permutation, zeros padded around a slice).
#include <coil/ops.h>

#include <algorithm>
#include <cstdlib>

#include "autograd/derivatives.h"
#include "graph/dims.h"

namespace coil::autograd {

namespace {

using C = const GradCtx&;

void reshape_back(C c) { c.set(0, c.grad().reshape_symint(c.in(0).sym_sizes())); }

// `g` placed at [start, start + g.size(dim) * step) along `dim` of zeros shaped as `x`.
Tensor embed(const Tensor& g, const Tensor& x, int64_t dim, int64_t start, int64_t step) {
  const int64_t n = g.size(dim);
  if (step == 1) {
    Shape pads(2 * static_cast<size_t>(x.dim()), 0);
    const size_t pair = static_cast<size_t>(x.dim() - 1 - dim) * 2;
    pads[pair] = start;
    pads[pair + 1] = x.size(dim) - start - n;
    return pad(g, pads);
  }
  Shape index_shape(x.dim(), 1);
  index_shape[dim] = n;
  Tensor index = arange(start, start + n * step, step, kInt64, g.device()).reshape(index_shape);
  return scatter_add(zeros_like(x).to(g.dtype()), dim, index.expand(g.sizes()), g);
}

void slice_rule(C c) {
  const Tensor& x = c.in(0);
  const int64_t dim = wrap_dim(c.args.i64(1), x.dim(), "slice");
  const int64_t size = x.size(dim);
  int64_t start = c.args.opt_i64(2).value_or(0);
  if (start < 0) start += size;
  start = std::clamp<int64_t>(start, 0, size);
  c.set(0, embed(c.grad(), x, dim, start, c.args.i64(4)));
}

void narrow_rule(C c) {
  const Tensor& x = c.in(0);
  const int64_t dim = wrap_dim(c.args.i64(1), x.dim(), "narrow");
  int64_t start = c.args.i64(2);
  if (start < 0) start += x.size(dim);
  c.set(0, embed(c.grad(), x, dim, start, 1));
}

void select_rule(C c) {
  const Tensor& x = c.in(0);
  const int64_t dim = wrap_dim(c.args.i64(1), x.dim(), "select");
  int64_t index = c.args.i64(2);
  if (index < 0) index += x.size(dim);
  c.set(0, embed(c.grad().unsqueeze(dim), x, dim, index, 1));
}

void permute_rule(C c) {
  const Shape& dims = c.args.ints(1);
  Shape inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    inverse[wrap_dim(dims[i], c.in(0).dim(), "permute")] = static_cast<int64_t>(i);
  c.set(0, c.grad().permute(inverse));
}

// cat: each input's slice of the gradient.
void cat_rule(C c) {
  const auto& inputs = c.args.tensors(0);
  const int64_t dim = wrap_dim(c.args.i64(1), c.out().dim(), "cat");
  std::vector<Tensor> grads;
  SymInt start = 0;
  for (const Tensor& t : inputs) {
    // PyTorch's cat skips 1-D empty tensors whatever the dim: they get an empty gradient.
    if (t.dim() == 1 && t.numel() == 0 && c.out().dim() != 1) {
      grads.push_back(zeros_like(t));
      continue;
    }
    grads.push_back(c.grad().narrow_symint(dim, start, t.sym_size(dim)));
    start = start + t.sym_size(dim);
  }
  c.set_list(0, grads);
}

// split / chunk: the outputs' gradients side by side again (zeros where none flowed).
void split_rule(C c) {
  const int64_t dim = wrap_dim(c.args.i64(2), c.in(0).dim(), op_name(c.op));
  c.set(0, cat(c.grads, dim));
}

void gather_rule(C c) {
  const Tensor& x = c.in(0);
  c.set(0, scatter_add(zeros_like(x).to(c.grad().dtype()), c.args.i64(1), c.in(2), c.grad()));
}

void index_select_rule(C c) {
  const Tensor& x = c.in(0);
  const int64_t dim = wrap_dim(c.args.i64(1), x.dim(), "index_select");
  Shape shape(x.dim(), 1);
  shape[dim] = -1;
  Tensor index = c.in(2).reshape(shape).expand_symint(c.grad().sym_sizes());
  c.set(0, scatter_add(zeros_like(x).to(c.grad().dtype()), dim, index, c.grad()));
}

void scatter_add_rule(C c) {
  c.set(0, c.grad());
  if (c.wants(3)) c.set(3, gather(c.grad(), c.args.i64(1), c.in(2)));
}

void pad_rule(C c) {
  COIL_CHECK(c.args.str(2) == "constant", "backward through pad: mode '", c.args.str(2),
             "' has no derivative yet (only 'constant' does)");
  Shape crop = c.args.ints(1);
  for (int64_t& p : crop) p = -p;
  c.set(0, pad(c.grad(), crop));
}

// repeat: the copies of each element summed.
void repeat_rule(C c) {
  const Tensor& x = c.in(0);
  const Shape& repeats = c.args.ints(1);
  const size_t lead = repeats.size() - static_cast<size_t>(x.dim());
  Shape split, dims;
  for (size_t i = 0; i < repeats.size(); ++i) {
    const int64_t size = i < lead ? 1 : x.size(static_cast<int64_t>(i - lead));
    dims.push_back(static_cast<int64_t>(split.size()));
    split.push_back(repeats[i]);
    split.push_back(size);
  }
  c.set(0, sum(c.grad().reshape(split), dims).reshape_symint(x.sym_sizes()));
}

// The storage positions of the elements of a view (sizes, strides, offset), minus `base`: an
// int64 tensor of the view's sizes.
Tensor storage_positions(const Shape& sizes, const Shape& strides, int64_t offset, int64_t base,
                         Device device) {
  Tensor pos = full({}, offset - base, kInt64, device);
  for (size_t d = 0; d < sizes.size(); ++d) {
    Shape along(sizes.size(), 1);
    along[d] = sizes[d];
    pos = pos + (arange(0, sizes[d], 1, kInt64) * strides[d]).reshape(along).to(device);
  }
  return pos.expand(sizes);
}

// The lowest and highest storage positions a non-empty view reaches.
std::pair<int64_t, int64_t> storage_span(const Shape& sizes, const Shape& strides, int64_t offset) {
  int64_t lo = offset, hi = offset;
  for (size_t d = 0; d < sizes.size(); ++d) {
    const int64_t reach = (sizes[d] - 1) * strides[d];
    (reach < 0 ? lo : hi) += reach;
  }
  return {lo, hi};
}

// Whether two elements of a view may share a storage position (false: they certainly do not).
// The dims by stride, each stride past everything the smaller ones reach.
bool may_overlap(const Shape& sizes, const Shape& strides) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (|stride|, size) of dims of size > 1
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] > 1) dims.emplace_back(std::abs(strides[d]), sizes[d]);
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;
  for (const auto& [stride, size] : dims) {
    if (stride <= reach) return true;
    reach += (size - 1) * stride;
  }
  return false;
}

// as_strided reads storage positions: each element of the gradient goes to the position it was
// read from (summed where the view's elements overlap), and each element of the input takes
// what its own position received. An input whose elements share positions (an expanded
// tensor) shares each position's gradient out evenly among them, as PyTorch does.
void as_strided_rule(C c) {
  const Tensor& x = c.args.tensor(0);  // only its geometry is read
  const Tensor& g = c.grad();
  const Shape &sizes = c.args.ints(1), &strides = c.args.ints(2);
  const int64_t offset = c.args.opt_i64(3).value_or(x.storage_offset());
  if (x.numel() == 0 || g.numel() == 0) {
    c.set(0, zeros(x.sizes(), g.dtype(), g.device()));
    return;
  }
  auto [in_lo, in_hi] = storage_span(x.sizes(), x.strides(), x.storage_offset());
  auto [out_lo, out_hi] = storage_span(sizes, strides, offset);
  const int64_t base = std::min(in_lo, out_lo), span = std::max(in_hi, out_hi) - base + 1;
  Tensor out_pos = storage_positions(sizes, strides, offset, base, g.device()).reshape({-1});
  Tensor in_pos =
      storage_positions(x.sizes(), x.strides(), x.storage_offset(), base, g.device()).reshape({-1});
  Tensor storage = scatter_add(zeros({span}, g.dtype(), g.device()), 0, out_pos, g.reshape({-1}));
  Tensor r = index_select(storage, 0, in_pos);
  if (may_overlap(x.sizes(), x.strides())) {
    Tensor count = scatter_add(zeros({span}, g.dtype(), g.device()), 0, in_pos,
                               ones({x.numel()}, g.dtype(), g.device()));
    r = r / index_select(count, 0, in_pos);
  }
  c.set(0, r.reshape(x.sizes()));
}

}  // namespace

std::vector<RuleEntry> shape_rules() {
  using O = OpId;
  // clang-format off
  return {
    {O::view, reshape_back}, {O::reshape, reshape_back}, {O::flatten, reshape_back},
    {O::unflatten, reshape_back}, {O::squeeze, reshape_back}, {O::unsqueeze, reshape_back},
    {O::permute, permute_rule},
    {O::transpose, [](C c) { c.set(0, c.grad().transpose(c.args.i64(1), c.args.i64(2))); }},
    {O::t, [](C c) { c.set(0, c.grad().t()); }},
    {O::expand, [](C c) { c.set(0, c.grad()); }},  // set() sums over the expanded dims
    {O::slice, slice_rule}, {O::narrow, narrow_rule}, {O::select, select_rule},
    {O::cat, cat_rule},
    {O::split, split_rule}, {O::split_with_sizes, split_rule}, {O::chunk, split_rule},
    {O::gather, gather_rule}, {O::index_select, index_select_rule},
    {O::scatter_add, scatter_add_rule},
    {O::pad, pad_rule},
    {O::repeat, repeat_rule},
    {O::flip, [](C c) { c.set(0, flip(c.grad(), c.args.ints(1))); }},
    {O::as_strided, as_strided_rule},
  };
  // clang-format on
}

}  // namespace coil::autograd
