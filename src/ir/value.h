// The loop IR's scalar expressions: the body a kernel evaluates at one point of its iteration
// space (Inductor's `ops.*` calls inside an inner_fn). Nodes are immutable and shared; they are
// built by the make functions below, and a Mutator returns the very node it was given when
// nothing below it changed (Halide's IRMutator), so rewrites allocate only what they alter.
//
// Every value has a dtype. Arithmetic happens in the value's dtype, with one exception the
// code generator implements: float16/bfloat16 values are held in float32 between load and
// store, as Inductor does (eager rounds after each op; the difference is within 16-bit
// tolerance).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <coil/dtype.h>
#include <coil/scalar.h>

#include "sym/expr.h"

namespace coil::ir {

// clang-format off
#define COIL_IR_UNARY_OPS(X)                                                                  \
  X(Neg) X(Abs) X(Sign) X(Exp) X(Exp2) X(Expm1) X(Log) X(Log2) X(Log1p) X(Sqrt) X(Rsqrt)      \
  X(Reciprocal) X(Sin) X(Cos) X(Tan) X(Tanh) X(Sigmoid) X(Relu) X(Erf) X(Floor) X(Ceil)       \
  X(Round) X(Trunc) X(LogicalNot) X(IsNan) X(IsInf) X(SoftmaxExp)
// Div is true division for floating dtypes and C's truncating division for integers; FloorDiv
// and Remainder follow Python (floor, the remainder takes the divisor's sign). Maximum and
// Minimum propagate NaN. Comparisons and logical ops yield bool.
#define COIL_IR_BINARY_OPS(X)                                                                 \
  X(Add) X(Sub) X(Mul) X(Div) X(FloorDiv) X(Remainder) X(Pow) X(Maximum) X(Minimum) X(Atan2)  \
  X(Eq) X(Ne) X(Lt) X(Le) X(Gt) X(Ge) X(LogicalAnd) X(LogicalOr) X(SoftmaxDiv)
// clang-format on
// SoftmaxExp and SoftmaxDiv are a float32 row softmax's exp(s) and e / sum (s = x - max(x))
// rearranged so that no value in between is subnormal: SoftmaxExp(s) = 2^64 e^max(s, -104.5)
// (below -104.5 the result is 0 either way) and SoftmaxDiv(e, sum) = e / sum for sums of
// those (>= 2^64), its subnormal results formed without subnormal arithmetic. On x86 each
// subnormal operand or result costs a microcode assist; wide rows (a product's) put a sixth
// of their exps below FLT_MIN. Lowering makes them from the softmax idiom alone
// (lower/pointwise.cpp).

enum class Op : uint8_t {
  Load,      // buffer[index]: buffer(), index(); an indirect load also has args (below)
  Constant,  // constant() in dtype()
  Index,     // the integer value of index() (int64): iota, masks such as tril
  Cast,      // args[0] converted to dtype()
  Where,     // args: condition, then, else (both evaluated)
#define COIL_X(name) name,
  COIL_IR_UNARY_OPS(COIL_X) COIL_IR_BINARY_OPS(COIL_X)
#undef COIL_X
};
const char* op_name(Op op);
bool is_unary(Op op);
bool is_binary(Op op);
bool is_comparison(Op op);  // Eq .. Ge, LogicalAnd/Or/Not, IsNan, IsInf: bool results

class ValueNode;
using Value = std::shared_ptr<const ValueNode>;

class ValueNode {
 public:
  Op op() const { return op_; }
  DType dtype() const { return dtype_; }
  const std::vector<Value>& args() const { return args_; }
  const std::string& buffer() const { return buffer_; }  // Load
  sym::Expr index() const { return index_; }             // Load, Index
  const Scalar& constant() const { return constant_; }   // Constant

  // An indirect load (Inductor's indirect_indexing): its index depends on loaded data. Each
  // args()[k] is an int64 value (computed at the same point as the load), and index() refers
  // to it through indirect_var(k, bounds[k]). A value must lie in [0, bounds[k]): one outside
  // that range reads no memory; the compiled call fails with an error naming bounds_op().
  // Negative values are out of range too, as in the eager gather/index_select/embedding.
  bool is_indirect() const { return op_ == Op::Load && !args_.empty(); }
  const std::vector<sym::Expr>& index_bounds() const { return bounds_; }
  const std::string& bounds_op() const { return bounds_op_; }

  // Leaves.
  static Value load(const std::string& buffer, DType dtype, sym::Expr index);
  static Value indirect_load(const std::string& buffer, DType dtype, sym::Expr index,
                             std::vector<Value> indices, std::vector<sym::Expr> bounds,
                             std::string bounds_op);
  // The symbol that stands for an indirect load's args()[k] inside its index: "ind0", ...,
  // ranging over [0, bound). It means args()[k] of the load whose index holds it, so loads
  // share these names; loop variables never take them.
  static sym::Expr indirect_var(size_t k, sym::Expr bound);
  static Value make_constant(Scalar value, DType dtype);
  static Value index_value(sym::Expr index);
  // Inner nodes; operands of binary ops and of Where's branches must share a dtype (lowering
  // inserts the casts type promotion asks for); InternalError otherwise.
  static Value cast(Value a, DType dtype);
  static Value unary(Op op, Value a);
  static Value binary(Op op, Value a, Value b);
  static Value where(Value cond, Value a, Value b);

  // The same node with other children / another index (used by mutators).
  Value with_args(std::vector<Value> args) const;
  Value with_index(sym::Expr index) const;

 private:
  ValueNode() = default;
  Op op_{};
  DType dtype_{};
  std::vector<Value> args_;
  std::string buffer_;
  sym::Expr index_ = nullptr;
  Scalar constant_;
  std::vector<sym::Expr> bounds_;
  std::string bounds_op_;
};

// Rebuilds a value bottom-up; the default visits children and rebuilds a node only when one of
// them changed.
class Mutator {
 public:
  virtual ~Mutator() = default;
  virtual Value mutate(const Value& v);
};

// Substitutes index variables in every Load and Index of `v` (an indirect load's index values
// included).
Value substitute(const Value& v, const sym::Bindings& bindings);
// Calls f(load) for every Load node of `v`, each distinct node once, in first-visit order
// (the loads inside an indirect load's index values before the indirect load).
void for_each_load(const Value& v, const std::function<void(const ValueNode&)>& f);
// Whether any node of `v` satisfies `pred`.
bool any_node(const Value& v, const std::function<bool(const ValueNode&)>& pred);
// "add(load(buf0, i0 + 8*i1), 1.0f)" — the form the loop-IR printer and logs use; an indirect
// load prints its values after the index: "load(buf0, 8*ind0 + i1; ind0 = load(buf1, i0) < 10
// for embedding)".
std::string to_string(const ValueNode& v);
inline std::string to_string(const Value& v) { return to_string(*v); }

}  // namespace coil::ir
