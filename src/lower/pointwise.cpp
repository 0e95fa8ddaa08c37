// Lowerings of the pointwise ops: each composes its inputs' loaders into a new loader.
#include <coil/error.h>

#include "lower/context.h"
#include "graph/dims.h"
#include "runtime/tensor_impl.h"

namespace coil::lower {

namespace {

using ir::Op;
using V = ir::ValueNode;
using Result = std::optional<std::vector<TensorBox>>;

const TensorMeta& out_meta(const Node& n) { return n.tensor_meta(); }
SymShape out_sizes(const Node& n) { return n.sym_layout().sizes; }

// A box over the node's output whose element at `idx` is f(idx).
Result pointwise(const Node& n, std::function<ir::Value(const Index&)> f) {
  return std::vector<TensorBox>{Context::memoized(out_meta(n).dtype, out_sizes(n), std::move(f))};
}

// PyTorch's result_type of the arguments at `idx` (tensors and wrapped numbers).
DType common_dtype(const Node& n, std::initializer_list<size_t> idx) {
  std::vector<Arg> args;
  for (const NodeArg& a : n.args())
    args.push_back(to_arg(a, [](Node* x) { return meta_tensor(x->tensor_meta()); }));
  return result_type(Args(args), idx);
}

// The IR op of each pointwise graph op that maps one to one.
const std::unordered_map<OpId, Op>& ir_ops() {
  static const std::unordered_map<OpId, Op> table = {
      {OpId::neg, Op::Neg},
      {OpId::abs, Op::Abs},
      {OpId::sign, Op::Sign},
      {OpId::exp, Op::Exp},
      {OpId::exp2, Op::Exp2},
      {OpId::expm1, Op::Expm1},
      {OpId::log, Op::Log},
      {OpId::log2, Op::Log2},
      {OpId::log1p, Op::Log1p},
      {OpId::sqrt, Op::Sqrt},
      {OpId::rsqrt, Op::Rsqrt},
      {OpId::reciprocal, Op::Reciprocal},
      {OpId::sin, Op::Sin},
      {OpId::cos, Op::Cos},
      {OpId::tan, Op::Tan},
      {OpId::tanh, Op::Tanh},
      {OpId::sigmoid, Op::Sigmoid},
      {OpId::relu, Op::Relu},
      {OpId::erf, Op::Erf},
      {OpId::floor, Op::Floor},
      {OpId::ceil, Op::Ceil},
      {OpId::round, Op::Round},
      {OpId::trunc, Op::Trunc},
      {OpId::logical_not, Op::LogicalNot},
      {OpId::isnan, Op::IsNan},
      {OpId::isinf, Op::IsInf},
      {OpId::add, Op::Add},
      {OpId::sub, Op::Sub},
      {OpId::mul, Op::Mul},
      {OpId::pow, Op::Pow},
      {OpId::remainder, Op::Remainder},
      {OpId::maximum, Op::Maximum},
      {OpId::minimum, Op::Minimum},
      {OpId::atan2, Op::Atan2},
      {OpId::eq, Op::Eq},
      {OpId::ne, Op::Ne},
      {OpId::lt, Op::Lt},
      {OpId::le, Op::Le},
      {OpId::gt, Op::Gt},
      {OpId::ge, Op::Ge},
      {OpId::logical_and, Op::LogicalAnd},
      {OpId::logical_or, Op::LogicalOr},
  };
  return table;
}

// The row softmax, as decomp/norms.cpp writes it and as users do:
//   s = sub(x, amax(x, d, true));  e = exp(s);  t = sum(e, d, true);  y = div(e, t)
// in float32, with e used by t and y alone and t by y alone. Then e and t may be kept 2^64
// times larger (SoftmaxExp, SoftmaxDiv: ir/value.h says why) and y is unchanged.
bool is_call(const Node* n, OpId op) { return n && n->kind() == NodeKind::Call && n->op() == op; }

Node* node_arg(const Node& n, size_t i) {
  auto* p = std::get_if<Node*>(&n.args()[i]);
  return p ? *p : nullptr;
}

Shape reduced_dims(const Node& r) {
  const Shape& sizes = r.tensor_meta().sizes;
  return wrap_dims(std::get<Shape>(r.args()[1]), static_cast<int64_t>(sizes.size()),
                   op_name(r.op()));
}

// The idiom's div, given its exp; nullptr where `e` is not the idiom's exp.
const Node* softmax_div_of(const Node& e) {
  if (!is_call(&e, OpId::exp) || e.tensor_meta().dtype != kFloat32 || e.users().size() != 2)
    return nullptr;
  Node* s = node_arg(e, 0);
  Node* max = is_call(s, OpId::sub) ? node_arg(*s, 1) : nullptr;
  if (!is_call(max, OpId::amax) || node_arg(*max, 0) != node_arg(*s, 0)) return nullptr;
  const Node *t = nullptr, *y = nullptr;
  for (const Node* u : e.users()) (is_call(u, OpId::sum) ? t : y) = u;
  if (!t || !is_call(y, OpId::div) || node_arg(*y, 0) != &e || node_arg(*y, 1) != t ||
      !std::holds_alternative<std::monostate>(y->args()[2]))
    return nullptr;
  bool same_rows = t->users().size() == 1 && t->tensor_meta().dtype == kFloat32 &&
                   std::get<bool>(t->args()[2]) && std::get<bool>(max->args()[2]) &&
                   reduced_dims(*t) == reduced_dims(*max);
  return same_rows ? y : nullptr;
}

Result lower_unary(Context& cx, const Node& n, std::string*) {
  Op op = ir_ops().at(n.op());
  if (softmax_div_of(n)) op = Op::SoftmaxExp;
  Node* x = std::get<Node*>(n.args()[0]);
  DType in = x->tensor_meta().dtype, out = out_meta(n).dtype;
  bool integral = !is_floating(in);
  if (integral && (op == Op::IsNan || op == Op::IsInf))
    return pointwise(n, [](const Index&) { return V::make_constant(false, kBool); });
  if (integral && (op == Op::Floor || op == Op::Ceil || op == Op::Round || op == Op::Trunc))
    return pointwise(n, [&cx, x](const Index& i) { return cx.box(x).load(i); });
  DType compute = op == Op::LogicalNot ? kBool : ir::is_comparison(op) ? in : out;
  return pointwise(n, [&cx, x, op, compute](const Index& i) {
    return V::unary(op, V::cast(cx.box(x).load(i), compute));
  });
}

// Integer division by a tensor can hit zero, which eager reports as an error: such calls keep
// the eager kernel, whose check needs the data.
bool divides_ints_by_tensor(const Node& n, DType compute) {
  return !is_floating(compute) && std::holds_alternative<Node*>(n.args()[1]);
}

Result lower_binary(Context& cx, const Node& n, std::string* why) {
  Op op = ir_ops().at(n.op());
  const TensorMeta& m = out_meta(n);
  bool logical = op == Op::LogicalAnd || op == Op::LogicalOr;
  DType compute = logical ? kBool : ir::is_comparison(op) ? common_dtype(n, {0, 1}) : m.dtype;
  if (op == Op::Remainder && divides_ints_by_tensor(n, compute)) {
    *why = "integer remainder by a tensor: the eager kernel checks for zero divisors";
    return std::nullopt;
  }
  if (op == Op::Pow && !is_floating(compute)) {
    *why = "integer pow: the eager kernel checks for negative exponents";
    return std::nullopt;
  }
  NodeArg a = n.args()[0], b = n.args()[1];
  return pointwise(n, [&cx, a, b, op, compute, sizes = out_sizes(n)](const Index& i) {
    return V::binary(op, load_arg(cx, a, compute, sizes, i), load_arg(cx, b, compute, sizes, i));
  });
}

Result lower_div(Context& cx, const Node& n, std::string* why) {
  const TensorMeta& m = out_meta(n);
  DType compute = m.dtype;
  auto mode = std::get_if<std::string>(&n.args()[2]);
  if (mode && divides_ints_by_tensor(n, compute)) {
    *why = "integer division by a tensor: the eager kernel checks for zero divisors";
    return std::nullopt;
  }
  NodeArg a = n.args()[0], b = n.args()[1];
  std::string rounding = mode ? *mode : "";
  Node* e = node_arg(n, 0);
  bool softmax = e && softmax_div_of(*e) == &n;
  return pointwise(
      n, [&cx, a, b, compute, rounding, softmax, sizes = out_sizes(n)](const Index& i) {
        ir::Value x = load_arg(cx, a, compute, sizes, i), y = load_arg(cx, b, compute, sizes, i);
        if (softmax) return V::binary(Op::SoftmaxDiv, x, y);
        if (rounding == "floor") return V::binary(Op::FloorDiv, x, y);
        ir::Value q = V::binary(Op::Div, x, y);
        return rounding == "trunc" && is_floating(compute) ? V::unary(Op::Trunc, q) : q;
      });
}

Result lower_where(Context& cx, const Node& n, std::string*) {
  const TensorMeta& m = out_meta(n);
  NodeArg c = n.args()[0], a = n.args()[1], b = n.args()[2];
  return pointwise(n, [&cx, c, a, b, dtype = m.dtype, sizes = out_sizes(n)](const Index& i) {
    return V::where(load_arg(cx, c, kBool, sizes, i), load_arg(cx, a, dtype, sizes, i),
                    load_arg(cx, b, dtype, sizes, i));
  });
}

Result lower_clamp(Context& cx, const Node& n, std::string*) {
  const TensorMeta& m = out_meta(n);
  NodeArg x = n.args()[0], lo = n.args()[1], hi = n.args()[2];
  return pointwise(n, [&cx, x, lo, hi, dtype = m.dtype, sizes = out_sizes(n)](const Index& i) {
    ir::Value v = load_arg(cx, x, dtype, sizes, i);
    if (!std::holds_alternative<std::monostate>(lo))
      v = V::binary(Op::Maximum, v, load_arg(cx, lo, dtype, sizes, i));
    if (!std::holds_alternative<std::monostate>(hi))
      v = V::binary(Op::Minimum, v, load_arg(cx, hi, dtype, sizes, i));
    return v;
  });
}

// clone, contiguous, to_dtype: a fresh value (never the input's storage, so that an output is
// never an alias of an input the program copied).
Result lower_copy(Context& cx, const Node& n, std::string*) {
  Node* x = std::get<Node*>(n.args()[0]);
  return pointwise(n, [&cx, x, dtype = out_meta(n).dtype](const Index& i) {
    return V::cast(cx.box(x).load(i), dtype);
  });
}

// tril keeps (i, j) where j - i <= diagonal; triu where j - i >= diagonal.
Result lower_triangle(Context& cx, const Node& n, std::string*) {
  Node* x = std::get<Node*>(n.args()[0]);
  int64_t diagonal = std::get<int64_t>(n.args()[1]);
  Op keep = n.op() == OpId::tril ? Op::Le : Op::Ge;
  return pointwise(n, [&cx, x, diagonal, keep, dtype = out_meta(n).dtype](const Index& i) {
    size_t d = i.size();
    ir::Value offset = V::index_value(i[d - 1] - i[d - 2]);
    ir::Value cond = V::binary(keep, offset, V::make_constant(diagonal, kInt64));
    return V::where(cond, cx.box(x).load(i), V::make_constant(0, dtype));
  });
}

}  // namespace

void register_pointwise(std::unordered_map<OpId, Lowering>& t) {
  for (const auto& [op, ir] : ir_ops()) t[op] = ir::is_unary(ir) ? lower_unary : lower_binary;
  t[OpId::div] = lower_div;
  t[OpId::where] = lower_where;
  t[OpId::clamp] = lower_clamp;
  for (OpId op : {OpId::clone, OpId::contiguous, OpId::to_dtype}) t[op] = lower_copy;
  t[OpId::tril] = lower_triangle;
  t[OpId::triu] = lower_triangle;
}

}  // namespace coil::lower
