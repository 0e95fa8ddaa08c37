// Lowerings of the view ops, as index transforms. A view of a realized buffer stays a strided
// view of that buffer (externs and outputs use it without a copy); a view of an unrealized
// value maps each output index to the input index it reads.
#include <coil/error.h>

#include "lower/context.h"
#include "runtime/tensor_impl.h"

namespace coil::lower {

namespace {

using Result = std::optional<std::vector<TensorBox>>;

bool is_reshape(OpId op) {
  return op == OpId::view || op == OpId::reshape || op == OpId::flatten || op == OpId::unflatten ||
         op == OpId::squeeze || op == OpId::unsqueeze;
}

// Whether the elements lie in row-major order without gaps (size-1 dims aside).
bool dense_row_major(const ir::Layout& l) {
  sym::Expr expected = sym::constant(1);
  for (size_t k = l.sizes.size(); k-- > 0;) {
    if (l.sizes[k]->is_const(1)) continue;
    if (l.strides[k] != expected) return false;
    expected = expected * l.sizes[k];
  }
  return true;
}

// The reshape family returns a view when the strides allow one and a copy otherwise; the
// layout tells them apart unless the result happens to be contiguous, which a copy always is.
bool is_view_of(const Node& n, const ir::Layout& input, const SymLayout& result) {
  if (!is_reshape(n.op()) || n.op() == OpId::view || dense_row_major(input)) return true;
  return result.strides != sym_contiguous_strides(result.sizes);
}

Result lower_view(Context& cx, const Node& n, std::string*) {
  Node* x = std::get<Node*>(n.args()[0]);
  const TensorBox& in = cx.box(x);
  std::vector<SymLayout> strided;
  if (in.storage) strided = layouts_over(cx, n, {{x, in.storage->view}});
  if (in.storage && is_view_of(n, in.storage->view, strided[0])) {
    std::vector<TensorBox> out;
    for (const SymLayout& l : strided)
      out.push_back(cx.from_storage(
          ir::TensorRef{in.storage->buffer, ir::Layout{in.dtype, l.sizes, l.strides, l.offset}}));
    return out;
  }
  std::vector<TensorBox> out;
  for (const SymLayout& m :
       layouts_over(cx, n, {{x, ir::Layout::contiguous(in.dtype, in.sizes)}})) {
    out.push_back(Context::memoized(in.dtype, m.sizes, [in, m](const Index& idx) {
      sym::Expr flat = m.offset;
      for (size_t k = 0; k < idx.size(); ++k)
        if (!m.sizes[k]->is_const(1)) flat = flat + idx[k] * m.strides[k];
      return in.load(ir::unravel(flat, in.sizes));
    }));
  }
  return out;
}

Result lower_flip(Context& cx, const Node& n, std::string*) {
  const TensorBox& in = cx.box(std::get<Node*>(n.args()[0]));
  Shape dims = std::get<Shape>(n.args()[1]);
  int64_t nd = static_cast<int64_t>(in.sizes.size());
  std::vector<bool> flipped(in.sizes.size(), false);
  for (int64_t d : dims) flipped[static_cast<size_t>(d < 0 ? d + nd : d)] = true;
  return std::vector<TensorBox>{
      Context::memoized(in.dtype, in.sizes, [in, flipped](const Index& i) {
        Index j = i;
        for (size_t k = 0; k < j.size(); ++k)
          if (flipped[k]) j[k] = in.sizes[k] - 1 - i[k];
        return in.load(j);
      })};
}

Result lower_repeat(Context& cx, const Node& n, std::string*) {
  const TensorBox& in = cx.box(std::get<Node*>(n.args()[0]));
  const TensorMeta& m = n.tensor_meta();
  const SymShape sizes = n.sym_layout().sizes;
  size_t lead = sizes.size() - in.sizes.size();
  return std::vector<TensorBox>{Context::memoized(m.dtype, sizes, [in, lead](const Index& i) {
    Index j;
    for (size_t k = 0; k < in.sizes.size(); ++k) j.push_back(sym::mod(i[lead + k], in.sizes[k]));
    return in.load(j);
  })};
}

}  // namespace

void register_views(std::unordered_map<OpId, Lowering>& t) {
  // as_strided is left to its eager kernel: its storage offset is absolute in the storage,
  // which a buffer's view does not know.
  for (OpId op : {OpId::view, OpId::reshape, OpId::permute, OpId::transpose, OpId::t, OpId::expand,
                  OpId::squeeze, OpId::unsqueeze, OpId::slice, OpId::narrow, OpId::select,
                  OpId::flatten, OpId::unflatten, OpId::split, OpId::split_with_sizes, OpId::chunk})
    t[op] = lower_view;
  t[OpId::flip] = lower_flip;
  t[OpId::repeat] = lower_repeat;
}

}  // namespace coil::lower
