#include "codegen/c_expr.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>

#include <coil/error.h>

namespace coil::codegen {

using ir::Op;

const char* compute_type(DType t) {
  switch (t) {
    case DType::Bool:
      return "bool";
    case DType::UInt8:
      return "unsigned char";
    case DType::Int8:
      return "signed char";
    case DType::Int32:
      return "int";
    case DType::Int64:
      return "i64";
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float32:
      return "float";
    case DType::Float64:
      return "double";
  }
  return "?";
}

std::string c_extreme(DType dtype, bool lowest, const CDialect& d) {
  if (is_floating(dtype))
    return std::string(lowest ? "-" : "") + (dtype == kFloat64 ? d.inf_d : d.inf_f);
  switch (dtype) {
    case DType::Bool:
      return lowest ? "false" : "true";
    case DType::UInt8:
      return lowest ? "0" : "255";
    case DType::Int8:
      return lowest ? "-128" : "127";
    case DType::Int32:
      return lowest ? "(-2147483647 - 1)" : "2147483647";
    default:
      return lowest ? "(-9223372036854775807LL - 1)" : "9223372036854775807LL";
  }
}

std::string c_literal(const Scalar& s, DType dtype, const CDialect& d) {
  if (dtype == kBool) return s.to_bool() ? "true" : "false";
  if (!is_floating(dtype))
    return "(" + std::string(compute_type(dtype)) + ")" + std::to_string(s.to_int()) + "LL";
  double v = s.to_double();
  bool f = dtype != kFloat64;
  if (std::isnan(v)) return f ? d.nan_f : d.nan_d;
  if (std::isinf(v)) return std::string(v < 0 ? "-" : "") + (f ? d.inf_f : d.inf_d);
  char buf[64];
  std::snprintf(buf, sizeof buf, f ? "%.9g" : "%.17g",
                f ? static_cast<double>(static_cast<float>(v)) : v);
  std::string text = buf;
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return f ? text + "f" : text;
}

namespace {

// How each op prints on scalars, as a template over its operands $a, $b, $c: @ is the
// dialect's prefix of the C math functions, $f the suffix of the compute type ("f" for float,
// "" for double), $0 and $1 literals of the operands' type.
const std::map<Op, const char*>& forms() {
  static const std::map<Op, const char*> m = {
      {Op::Where, "($a ? $b : $c)"},
      {Op::Neg, "(-$a)"},
      {Op::Abs, "@fabs$f($a)"},
      {Op::Sign, "coil_sign($a)"},
      {Op::Exp, "@exp$f($a)"},
      {Op::Exp2, "@exp2$f($a)"},
      {Op::Expm1, "@expm1$f($a)"},
      {Op::Log, "@log$f($a)"},
      {Op::Log2, "@log2$f($a)"},
      {Op::Log1p, "@log1p$f($a)"},
      {Op::Sqrt, "@sqrt$f($a)"},
      {Op::Rsqrt, "($1 / @sqrt$f($a))"},
      {Op::Reciprocal, "($1 / $a)"},
      {Op::Sin, "@sin$f($a)"},
      {Op::Cos, "@cos$f($a)"},
      {Op::Tan, "@tan$f($a)"},
      {Op::Tanh, "@tanh$f($a)"},
      {Op::Sigmoid, "($1 / ($1 + @exp$f(-$a)))"},
      {Op::Relu, "($a < $0 ? $0 : $a)"},
      {Op::Erf, "@erf$f($a)"},
      {Op::Floor, "@floor$f($a)"},
      {Op::Ceil, "@ceil$f($a)"},
      {Op::Round, "@nearbyint$f($a)"},
      {Op::Trunc, "@trunc$f($a)"},
      {Op::LogicalNot, "(!$a)"},
      {Op::IsNan, "($a != $a)"},
      {Op::IsInf, "@isinf($a)"},
      {Op::SoftmaxExp, "coil_softmax_exp($a)"},
      {Op::Add, "($a + $b)"},
      {Op::Sub, "($a - $b)"},
      {Op::Mul, "($a * $b)"},
      {Op::Div, "($a / $b)"},
      {Op::FloorDiv, "coil_floordiv_float($a, $b)"},
      {Op::Remainder, "coil_remainder_float($a, $b)"},
      {Op::Pow, "@pow$f($a, $b)"},
      {Op::Maximum, "smax($a, $b)"},
      {Op::Minimum, "smin($a, $b)"},
      {Op::Atan2, "@atan2$f($a, $b)"},
      {Op::Eq, "($a == $b)"},
      {Op::Ne, "($a != $b)"},
      {Op::Lt, "($a < $b)"},
      {Op::Le, "($a <= $b)"},
      {Op::Gt, "($a > $b)"},
      {Op::Ge, "($a >= $b)"},
      {Op::LogicalAnd, "($a && $b)"},
      {Op::LogicalOr, "($a || $b)"},
      {Op::SoftmaxDiv, "coil_softmax_div($a, $b)"},
  };
  return m;
}

// The forms integers and bools need instead (their ops have no libm builtin, bool arithmetic
// is logical); nullptr where the table's form serves.
const char* integral_form(Op op, DType t) {
  bool b = t == kBool;
  switch (op) {
    case Op::Abs:
      return "($a < 0 ? -$a : $a)";
    case Op::Add:
      return b ? "($a | $b)" : nullptr;
    case Op::Mul:
      return b ? "($a & $b)" : nullptr;
    case Op::FloorDiv:
      return b ? "$a" : "coil_floordiv_int($a, $b)";
    case Op::Remainder:
      return b ? "false" : "coil_mod_int($a, $b)";
    default:
      return nullptr;
  }
}

}  // namespace

std::string expand_form(const char* form, const std::vector<std::string>& x,
                        const std::map<char, std::string>& extra) {
  std::string out;
  for (const char* p = form; *p; ++p) {
    if (*p == '@') {
      out += extra.at('@');
    } else if (*p != '$') {
      out += *p;
    } else if (p[1] >= 'a' && p[1] <= 'c') {
      out += x.at(static_cast<size_t>(p[1] - 'a'));
      ++p;
    } else {
      std::string key;
      while (p[1] && std::isalnum(static_cast<unsigned char>(p[1]))) key += *++p;
      out += extra.at(key.size() == 1 ? key[0] : 's');  // "$sincos" -> 's'
    }
  }
  return out;
}

std::string scalar_op(const ir::ValueNode& v, const std::vector<std::string>& x,
                      const CDialect& d) {
  const DType t = v.args()[0]->dtype();  // the operands' dtype
  auto it = forms().find(v.op());
  COIL_ASSERT(it != forms().end(), "codegen: no form of ", ir::op_name(v.op()));
  const char* form = is_floating(t) ? nullptr : integral_form(v.op(), t);
  std::map<char, std::string> extra = {{'f', t == kFloat64 ? "" : "f"},
                                       {'0', c_literal(0, t, d)},
                                       {'1', c_literal(1, t, d)},
                                       {'@', d.math}};
  return expand_form(form ? form : it->second, x, extra);
}

}  // namespace coil::codegen
