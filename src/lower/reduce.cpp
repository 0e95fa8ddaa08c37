// Lowerings of the reductions: each becomes a Reduction buffer over the reduced dims.
#include <coil/error.h>

#include "lower/context.h"
#include "ops/meta_util.h"

namespace coil::lower {

namespace {

using ir::Op;
using ir::ReduceKind;
using V = ir::ValueNode;
using Result = std::optional<std::vector<TensorBox>>;

// Reduces `x` over `dims` (all dims when empty) into a new buffer shaped like the node's
// output; body(v) turns the loaded element into what is accumulated.
TensorBox reduce(Context& cx, const Node& n, Node* x, Shape dims, bool keepdim, ReduceKind kind,
                 DType dtype, const std::function<ir::Value(ir::Value)>& body) {
  const Shape& in = x->tensor_meta().sizes;
  int64_t ndim = static_cast<int64_t>(in.size());
  if (dims.empty())
    for (int64_t d = 0; d < ndim; ++d) dims.push_back(d);
  dims = ops::wrap_dims(dims, ndim, op_name(n.op()));
  std::vector<bool> reduced(in.size(), false);
  Shape rsizes;
  for (int64_t d = 0; d < ndim; ++d)
    if (std::find(dims.begin(), dims.end(), d) != dims.end()) reduced[d] = true;
  for (int64_t d = 0; d < ndim; ++d)
    if (reduced[d]) rsizes.push_back(in[d]);

  ir::Computation c;
  c.ranges = n.tensor_meta().sizes;
  c.vars = Context::vars(c.ranges, "i");
  c.reduction_ranges = rsizes;
  c.rvars = Context::vars(rsizes, "j");
  Index idx;
  size_t out_k = 0, r_k = 0;
  for (int64_t d = 0; d < ndim; ++d) {
    if (reduced[d]) {
      idx.push_back(c.rvars[r_k++]);
      if (keepdim) ++out_k;
    } else {
      idx.push_back(c.vars[out_k++]);
    }
  }
  c.body = body(cx.box(x).load(idx));
  c.reduce = kind;
  c.dtype = dtype;
  ir::Buffer b;
  b.kind = ir::BufferKind::Computed;
  b.layout = ir::Layout::contiguous(dtype, c.ranges);
  b.compute = std::move(c);
  ir::Layout layout = b.layout;
  return cx.from_storage(ir::TensorRef{cx.add_buffer(std::move(b)), layout});
}

Shape dims_arg(const Node& n) { return std::get<Shape>(n.args()[1]); }
Node* self_arg(const Node& n) { return std::get<Node*>(n.args()[0]); }

// Accumulation happens in float32 for the 16-bit floats, in the result dtype otherwise.
DType acc_dtype(DType t) { return is_reduced_float(t) ? kFloat32 : t; }

// sum, prod, amax, amin, any, all: (self, dim, keepdim, ...).
Result lower_simple(Context& cx, const Node& n, std::string*) {
  static const std::unordered_map<OpId, ReduceKind> kinds = {
      {OpId::sum, ReduceKind::Sum},  {OpId::prod, ReduceKind::Prod}, {OpId::amax, ReduceKind::Max},
      {OpId::amin, ReduceKind::Min}, {OpId::any, ReduceKind::Any},   {OpId::all, ReduceKind::All}};
  ReduceKind kind = kinds.at(n.op());
  DType out = n.tensor_meta().dtype;
  DType acc = acc_dtype(out);
  bool keepdim = std::get<bool>(n.args()[2]);
  TensorBox r = reduce(cx, n, self_arg(n), dims_arg(n), keepdim, kind, acc,
                       [acc](ir::Value v) { return V::cast(v, acc); });
  if (acc == out) return std::vector<TensorBox>{r};
  return std::vector<TensorBox>{Context::memoized(
      out, r.sizes, [r, out](const Index& i) { return V::cast(r.load(i), out); })};
}

Result lower_arg_reduce(Context& cx, const Node& n, std::string*) {
  auto dim = std::get_if<int64_t>(&n.args()[1]);
  bool keepdim = std::get<bool>(n.args()[2]);
  Node* x = self_arg(n);
  if (!dim && keepdim) return std::nullopt;  // all dims kept as size 1: rare, eager handles it
  ReduceKind kind = n.op() == OpId::argmax ? ReduceKind::ArgMax : ReduceKind::ArgMin;
  DType in = acc_dtype(x->tensor_meta().dtype);
  Shape dims = dim ? Shape{*dim} : Shape{};
  return std::vector<TensorBox>{
      reduce(cx, n, x, dims, keepdim, kind, kInt64, [in](ir::Value v) { return V::cast(v, in); })};
}

// var: Welford's sum of squared deviations, divided by (count - correction) afterwards.
Result lower_var(Context& cx, const Node& n, std::string*) {
  Node* x = self_arg(n);
  DType out = n.tensor_meta().dtype;
  DType acc = acc_dtype(out);
  double correction = std::get<double>(n.args()[2]);
  bool keepdim = std::get<bool>(n.args()[3]);
  Shape dims = dims_arg(n);
  const Shape& in = x->tensor_meta().sizes;
  int64_t count = 1;
  if (dims.empty()) {
    for (int64_t s : in) count *= s;
  } else {
    for (int64_t d : ops::wrap_dims(dims, static_cast<int64_t>(in.size()), "var")) count *= in[d];
  }
  TensorBox m2 = reduce(cx, n, x, dims, keepdim, ReduceKind::WelfordM2, acc,
                        [acc](ir::Value v) { return V::cast(v, acc); });
  double denom = std::max(0.0, static_cast<double>(count) - correction);
  return std::vector<TensorBox>{
      Context::memoized(out, m2.sizes, [m2, acc, out, denom](const Index& i) {
        return V::cast(V::binary(Op::Div, m2.load(i), V::make_constant(denom, acc)), out);
      })};
}

}  // namespace

void register_reductions(std::unordered_map<OpId, Lowering>& t) {
  for (OpId op : {OpId::sum, OpId::prod, OpId::amax, OpId::amin, OpId::any, OpId::all})
    t[op] = lower_simple;
  t[OpId::argmax] = lower_arg_reduce;
  t[OpId::argmin] = lower_arg_reduce;
  t[OpId::var] = lower_var;
}

}  // namespace coil::lower
