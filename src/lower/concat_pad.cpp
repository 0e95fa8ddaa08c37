// Lowerings of cat and constant pad as pointwise values: each output element selects the input
// (or the fill value) its position falls in; every load's index is clamped into its input
// (clamp_into: a discarded load still runs).
#include <coil/error.h>

#include "lower/context.h"
#include "graph/aliasing.h"
#include "graph/dims.h"
#include "graph/sym_rules.h"

namespace coil::lower {

namespace {

using Result = std::optional<std::vector<TensorBox>>;
using V = ir::ValueNode;

// index < bound, as a bool value.
ir::Value below(sym::Expr index, sym::Expr bound) {
  return V::binary(ir::Op::Lt, V::index_value(index), size_value(bound, kInt64));
}

// A cat of views of one written buffer that lie side by side along `dim` (a gradient written
// in the layout of the projection its parts were split from), seen by nothing else: that
// buffer, viewed whole, with no copy. (Not of a graph input, which a result must not alias.)
std::optional<TensorBox> cat_as_view(Context& cx, const Node& n, const std::vector<Node*>& inputs,
                                     int64_t dim, const SymShape& sizes) {
  const ir::TensorRef* first = nullptr;
  const Node* base = nullptr;
  const size_t d = static_cast<size_t>(dim);
  sym::Expr next;
  for (const Node* in : inputs) {
    const TensorBox& b = cx.box(in);
    const Node* from = storage_root(in);
    if (!b.storage || b.dtype != n.tensor_meta().dtype || (base && from != base)) return {};
    const ir::Layout& v = b.storage->view;
    if (!first) {
      first = &*b.storage;
      base = from;
      // Seen by nothing but views of it and this cat.
      const ir::Buffer& buffer = cx.program().buffer(first->buffer);
      if (buffer.kind == ir::BufferKind::Input || buffer.kind == ir::BufferKind::Constant ||
          any_alias_user(from, [&](const Node& u) { return &u != &n && !aliases_its_input(u); }))
        return {};
    } else if (b.storage->buffer != first->buffer || v.strides != first->view.strides ||
               v.offset != next) {
      return {};
    }
    next = v.offset + v.sizes[d] * v.strides[d];
  }
  if (!first) return {};
  ir::TensorRef whole = *first;
  whole.view.sizes = sizes;
  return cx.from_storage(whole);
}

Result lower_cat(Context& cx, const Node& n, std::string*) {
  const DType dtype = n.tensor_meta().dtype;
  const SymShape sizes = n.sym_layout().sizes;
  const int64_t dim =
      wrap_dim(std::get<int64_t>(n.args()[1]), static_cast<int64_t>(sizes.size()), "cat");
  const auto& inputs = std::get<std::vector<Node*>>(n.args()[0]);
  if (std::optional<TensorBox> view = cat_as_view(cx, n, inputs, dim, sizes))
    return std::vector<TensorBox>{*view};
  std::vector<TensorBox> parts;
  std::vector<sym::Expr> starts;
  sym::Expr start = sym::constant(0);
  for (Node* in : inputs) {
    const TensorBox& b = cx.box(in);
    // Empty inputs add nothing (and 1-D empty ones may have any other sizes: PyTorch's rule);
    // sizes 0 are never symbolic.
    if (sym_numel(b.sizes)->is_const(0)) continue;
    parts.push_back(b);
    starts.push_back(start);
    start = start + b.sizes[static_cast<size_t>(dim)];
  }
  if (parts.empty()) return std::nullopt;
  return std::vector<TensorBox>{
      Context::memoized(dtype, sizes, [parts, starts, dim, dtype](const Index& i) {
        auto part = [&](size_t k) {
          Index j = i;
          const sym::Expr size = parts[k].sizes[static_cast<size_t>(dim)];
          j[dim] = clamp_into(i[dim] - starts[k], size);
          return V::cast(parts[k].load(j), dtype);
        };
        ir::Value v = part(parts.size() - 1);
        for (size_t k = parts.size() - 1; k-- > 0;)
          v = V::where(below(i[dim], starts[k + 1]), part(k), v);
        return v;
      })};
}

Result lower_pad(Context& cx, const Node& n, std::string* why_not) {
  const std::string& mode = std::get<std::string>(n.args()[2]);
  if (mode != "constant") {
    *why_not = "pad mode '" + mode + "' has no lowering: runs the eager kernel";
    return std::nullopt;
  }
  const TensorBox& in = cx.box(std::get<Node*>(n.args()[0]));
  const SymShape pads = sym_ints_arg(n.args()[1]);
  const DType dtype = n.tensor_meta().dtype;
  const double fill = std::get<double>(n.args()[3]);
  const size_t nd = in.sizes.size();
  return std::vector<TensorBox>{
      Context::memoized(dtype, n.sym_layout().sizes, [in, pads, dtype, fill, nd](const Index& i) {
        Index j = i;
        ir::Value inside;
        // pads lists (before, after) pairs from the last dim backwards.
        for (size_t p = 0; 2 * p < pads.size(); ++p) {
          const size_t d = nd - 1 - p;
          const sym::Expr before = pads[2 * p], size = in.sizes[d];
          if (before->is_const(0) && pads[2 * p + 1]->is_const(0)) continue;
          const sym::Expr at = i[d] - before;
          const ir::Value ok = in_range(at, size);
          inside = inside ? V::binary(ir::Op::LogicalAnd, inside, ok) : ok;
          j[d] = clamp_into(at, size);
        }
        ir::Value v = in.load(j);
        return inside ? V::where(inside, v, V::make_constant(fill, dtype)) : v;
      })};
}

}  // namespace

void register_concat_pad(std::unordered_map<OpId, Lowering>& t) {
  t[OpId::cat] = lower_cat;
  t[OpId::pad] = lower_pad;
}

}  // namespace coil::lower
