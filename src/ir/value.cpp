#include "ir/value.h"

#include <unordered_set>

#include <coil/error.h>

namespace coil::ir {

const char* op_name(Op op) {
  switch (op) {
    case Op::Load:
      return "load";
    case Op::Constant:
      return "constant";
    case Op::Index:
      return "index";
    case Op::Cast:
      return "cast";
    case Op::Where:
      return "where";
#define COIL_X(name) \
  case Op::name:     \
    return #name;
      COIL_IR_UNARY_OPS(COIL_X) COIL_IR_BINARY_OPS(COIL_X)
#undef COIL_X
  }
  return "?";
}

bool is_unary(Op op) { return op >= Op::Neg && op <= Op::SoftmaxExp; }
bool is_binary(Op op) { return op >= Op::Add; }
bool is_comparison(Op op) {
  return (op >= Op::Eq && op <= Op::LogicalOr) || op == Op::LogicalNot || op == Op::IsNan ||
         op == Op::IsInf;
}

Value ValueNode::load(const std::string& buffer, DType dtype, sym::Expr index) {
  auto n = std::shared_ptr<ValueNode>(new ValueNode());
  n->op_ = Op::Load;
  n->dtype_ = dtype;
  n->buffer_ = buffer;
  n->index_ = index;
  return n;
}

Value ValueNode::indirect_load(const std::string& buffer, DType dtype, sym::Expr index,
                               std::vector<Value> indices, std::vector<sym::Expr> bounds,
                               std::string bounds_op) {
  COIL_ASSERT(!indices.empty() && indices.size() == bounds.size(),
              "ir: an indirect load needs one bound per index value");
  for (size_t k = 0; k < indices.size(); ++k)
    COIL_ASSERT(indices[k]->dtype() == kInt64 && bounds[k]->range().lo > 0, "ir: indirect index ",
                k, " of ", buffer, " is ", dtype_name(indices[k]->dtype()), " with bound ",
                sym::to_string(bounds[k]));
  auto n = std::shared_ptr<ValueNode>(new ValueNode());
  n->op_ = Op::Load;
  n->dtype_ = dtype;
  n->buffer_ = buffer;
  n->index_ = index;
  n->args_ = std::move(indices);
  n->bounds_ = std::move(bounds);
  n->bounds_op_ = std::move(bounds_op);
  return n;
}

sym::Expr ValueNode::indirect_var(size_t k, sym::Expr bound) {
  return sym::index_var("ind" + std::to_string(k), bound);
}

Value ValueNode::make_constant(Scalar value, DType dtype) {
  auto n = std::shared_ptr<ValueNode>(new ValueNode());
  n->op_ = Op::Constant;
  n->dtype_ = dtype;
  n->constant_ = value;
  return n;
}

Value ValueNode::index_value(sym::Expr index) {
  auto n = std::shared_ptr<ValueNode>(new ValueNode());
  n->op_ = Op::Index;
  n->dtype_ = kInt64;
  n->index_ = index;
  return n;
}

Value ValueNode::cast(Value a, DType dtype) {
  if (a->dtype() == dtype) return a;
  auto n = std::shared_ptr<ValueNode>(new ValueNode());
  n->op_ = Op::Cast;
  n->dtype_ = dtype;
  n->args_ = {std::move(a)};
  return n;
}

Value ValueNode::unary(Op op, Value a) {
  COIL_ASSERT(is_unary(op), "ir: ", op_name(op), " is not a unary op");
  auto n = std::shared_ptr<ValueNode>(new ValueNode());
  n->op_ = op;
  n->dtype_ = is_comparison(op) ? kBool : a->dtype();
  n->args_ = {std::move(a)};
  return n;
}

Value ValueNode::binary(Op op, Value a, Value b) {
  COIL_ASSERT(is_binary(op), "ir: ", op_name(op), " is not a binary op");
  COIL_ASSERT(a->dtype() == b->dtype(), "ir: ", op_name(op), " of ", dtype_name(a->dtype()),
              " and ", dtype_name(b->dtype()));
  auto n = std::shared_ptr<ValueNode>(new ValueNode());
  n->op_ = op;
  n->dtype_ = is_comparison(op) ? kBool : a->dtype();
  n->args_ = {std::move(a), std::move(b)};
  return n;
}

Value ValueNode::where(Value cond, Value a, Value b) {
  COIL_ASSERT(cond->dtype() == kBool && a->dtype() == b->dtype(), "ir: where of ",
              dtype_name(cond->dtype()), ", ", dtype_name(a->dtype()), ", ",
              dtype_name(b->dtype()));
  auto n = std::shared_ptr<ValueNode>(new ValueNode());
  n->op_ = Op::Where;
  n->dtype_ = a->dtype();
  n->args_ = {std::move(cond), std::move(a), std::move(b)};
  return n;
}

Value ValueNode::with_args(std::vector<Value> args) const {
  auto n = std::shared_ptr<ValueNode>(new ValueNode(*this));
  n->args_ = std::move(args);
  return n;
}

Value ValueNode::with_index(sym::Expr index) const {
  auto n = std::shared_ptr<ValueNode>(new ValueNode(*this));
  n->index_ = index;
  return n;
}

Value Mutator::mutate(const Value& v) {
  std::vector<Value> args;
  bool changed = false;
  for (const Value& a : v->args()) {
    args.push_back(mutate(a));
    changed |= args.back() != a;
  }
  return changed ? v->with_args(std::move(args)) : v;
}

namespace {
class Substituter : public Mutator {
 public:
  explicit Substituter(const sym::Bindings& b) : bindings_(b) {}
  Value mutate(const Value& v) override {
    Value n = Mutator::mutate(v);  // an indirect load's index values hold loop variables too
    if (v->index() == nullptr) return n;
    sym::Expr e = sym::substitute(v->index(), bindings_);
    return e == v->index() ? n : n->with_index(e);
  }

 private:
  const sym::Bindings& bindings_;
};

void visit(const Value& v, std::unordered_set<const ValueNode*>& seen,
           const std::function<void(const ValueNode&)>& f) {
  if (!seen.insert(v.get()).second) return;
  for (const Value& a : v->args()) visit(a, seen, f);
  f(*v);
}
}  // namespace

Value substitute(const Value& v, const sym::Bindings& bindings) {
  return Substituter(bindings).mutate(v);
}

void for_each_load(const Value& v, const std::function<void(const ValueNode&)>& f) {
  std::unordered_set<const ValueNode*> seen;
  visit(v, seen, [&](const ValueNode& n) {
    if (n.op() == Op::Load) f(n);
  });
}

bool any_node(const Value& v, const std::function<bool(const ValueNode&)>& pred) {
  bool found = false;
  std::unordered_set<const ValueNode*> seen;
  visit(v, seen, [&](const ValueNode& n) { found = found || pred(n); });
  return found;
}

std::string to_string(const ValueNode& v) {
  switch (v.op()) {
    case Op::Load: {
      std::string s = "load(" + v.buffer() + ", " + sym::to_string(v.index());
      for (size_t k = 0; k < v.args().size(); ++k)
        s += (k ? ", " : "; ") + sym::to_string(ValueNode::indirect_var(k, v.index_bounds()[k])) +
             " = " + to_string(v.args()[k]) + " < " + sym::to_string(v.index_bounds()[k]);
      if (v.is_indirect()) s += " for " + v.bounds_op();
      return s + ")";
    }
    case Op::Constant:
      return v.constant().str() + dtype_short_name(v.dtype());
    case Op::Index:
      return "index(" + sym::to_string(v.index()) + ")";
    case Op::Cast:
      return std::string("to_") + dtype_short_name(v.dtype()) + "(" + to_string(v.args()[0]) + ")";
    default: {
      std::string s = v.op() == Op::Where ? "where" : op_name(v.op());
      s[0] = static_cast<char>(std::tolower(s[0]));
      s += "(";
      for (size_t i = 0; i < v.args().size(); ++i) s += (i ? ", " : "") + to_string(v.args()[i]);
      return s + ")";
    }
  }
}

}  // namespace coil::ir
