#include "codegen/cpp_expr.h"

#include <cmath>
#include <cstdio>

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

const char* memory_type(DType t) {
  if (t == DType::Float16) return "_Float16";
  if (t == DType::BFloat16) return "bf16";
  return compute_type(t);
}

std::string c_literal(const Scalar& s, DType dtype) {
  if (dtype == kBool) return s.to_bool() ? "true" : "false";
  if (!is_floating(dtype))
    return "(" + std::string(compute_type(dtype)) + ")" + std::to_string(s.to_int()) + "LL";
  double v = s.to_double();
  bool f = dtype != kFloat64;
  if (std::isnan(v)) return f ? "__builtin_nanf(\"\")" : "__builtin_nan(\"\")";
  if (std::isinf(v))
    return std::string(v < 0 ? "-" : "") + (f ? "__builtin_inff()" : "__builtin_inf()");
  char buf[64];
  std::snprintf(buf, sizeof buf, f ? "%.9g" : "%.17g",
                f ? static_cast<double>(static_cast<float>(v)) : v);
  std::string text = buf;
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return f ? text + "f" : text;
}

namespace {

bool depends_on_lane(const ir::ValueNode& v, sym::Expr lane) {
  return v.index() && sym::depends_on(v.index(), lane);
}

// Vector mode keeps these ops per lane only for float32 (and masks for bool).
bool vector_op(Op op) {
  switch (op) {
    case Op::FloorDiv:
    case Op::Remainder:
      return false;
    default:
      return true;
  }
}

}  // namespace

bool vectorizable(const ir::Value& v, sym::Expr lane) {
  bool ok = true;
  std::unordered_map<const ir::ValueNode*, bool> varying;
  std::function<bool(const ir::Value&)> visit = [&](const ir::Value& n) -> bool {
    if (auto it = varying.find(n.get()); it != varying.end()) return it->second;
    bool var = depends_on_lane(*n, lane);
    for (const ir::Value& a : n->args()) var = visit(a) || var;
    if (var) {
      DType t = n->dtype();
      if (t != kFloat32 && t != kBool) ok = false;
      if (n->op() == Op::Index || !vector_op(n->op())) ok = false;
      if (n->op() == Op::Load && t != kFloat32) ok = false;
      if (n->op() == Op::Cast && n->args()[0]->dtype() != kFloat32 &&
          n->args()[0]->dtype() != kBool)
        ok = false;
    }
    varying[n.get()] = var;
    return var;
  };
  visit(v);
  return ok;
}

BodyEmitter::BodyEmitter(std::string& out, std::string indent, sym::Expr lane, int& counter)
    : out_(out), indent_(std::move(indent)), lane_(lane), counter_(counter) {}

Emitted BodyEmitter::temp(const std::string& type, const std::string& expr, bool varying) {
  std::string key = type + "=" + expr;
  if (auto it = cse_.find(key); it != cse_.end()) return it->second;
  Emitted e{"t" + std::to_string(counter_++), varying};
  line(type + " " + e.text + " = " + expr + ";");
  cse_.emplace(key, e);
  return e;
}

std::string BodyEmitter::varying(const Emitted& e, DType dtype) {
  if (e.varying) return e.text;
  return dtype == kBool ? "vmask(" + e.text + ")" : "vsplat(" + e.text + ")";
}

Emitted BodyEmitter::emit(const ir::Value& v) {
  if (auto it = memo_.find(v.get()); it != memo_.end()) return it->second;
  auto kept_at = kept_.empty() || v->dtype() != kFloat32 ? kept_.end() : kept_.find(to_string(v));
  if (kept_at != kept_.end() && !kept_at->second.defines) {
    const Kept& k = kept_at->second;
    Emitted e = lane_ ? temp("vf32", "vload(" + k.array + " + " + k.index + ")", true)
                      : temp("float", k.array + "[" + k.index + "]", false);
    memo_.emplace(v.get(), e);
    return e;
  }
  std::vector<Emitted> args;
  for (const ir::Value& a : v->args()) args.push_back(emit(a));
  Emitted e = emit_node(*v, args);
  if (kept_at != kept_.end()) {
    const Kept& k = kept_at->second;
    line(lane_ ? "vstore(" + k.array + " + " + k.index + ", " + varying(e, kFloat32) + ");"
               : k.array + "[" + k.index + "] = " + e.text + ";");
  }
  memo_.emplace(v.get(), e);
  return e;
}

Emitted BodyEmitter::emit_load(const ir::ValueNode& v) {
  if (auto it = forwarded_.find(v.buffer()); it != forwarded_.end()) return it->second;
  if (recompute)
    if (std::optional<ir::Value> body = recompute(v.buffer())) return emit(*body);
  DType t = v.dtype();
  const std::string& buf = v.buffer();
  auto scalar_read = [&](const std::string& index) {
    std::string at = buf + "[" + index + "]";
    if (t == kBFloat16) return "bf2f(" + at + ")";
    if (t == kFloat16) return "(float)" + at;
    return at;
  };
  bool var = lane_ && sym::depends_on(v.index(), lane_);
  if (!var) return temp(compute_type(t), scalar_read(sym::to_c(v.index())), false);
  int64_t stride = 0;
  if (sym::constant_stride(v.index(), lane_, &stride) && stride == 1)
    return temp("vf32", "vload(" + buf + " + " + sym::to_c(v.index()) + ")", true);
  // A gather: each lane computes its own index.
  sym::Expr k = sym::var("k_", sym::Range{0, 15});
  sym::Expr at = sym::substitute(v.index(), {{lane_, lane_ + k}});
  Emitted e{"t" + std::to_string(counter_++), true};
  line("vf32 " + e.text + ";");
  line("for (int k_ = 0; k_ < COIL_VEC; ++k_) " + e.text + "[k_] = " + buf + "[" + sym::to_c(at) +
       "];");
  return e;
}

Emitted BodyEmitter::emit_node(const ir::ValueNode& v, const std::vector<Emitted>& a) {
  switch (v.op()) {
    case Op::Load:
      return emit_load(v);
    case Op::Constant:
      return {c_literal(v.constant(), v.dtype()), false};
    case Op::Index:
      return temp("i64", sym::to_c(v.index()), false);
    default:
      break;
  }
  bool var = false;
  for (const Emitted& e : a) var |= e.varying;
  return var ? emit_vector_op(v, a) : emit_scalar_op(v, a);
}

namespace {

// The libm builtin of `name` for the compute type of `t`.
std::string fn(const char* name, DType t) {
  return std::string("__builtin_") + name + (t == kFloat64 ? "" : "f");
}

}  // namespace

Emitted BodyEmitter::emit_scalar_op(const ir::ValueNode& v, const std::vector<Emitted>& args) {
  DType t = v.args().empty() ? v.dtype() : v.args()[0]->dtype();  // the operands' dtype
  std::string ct = compute_type(v.dtype());
  std::string a = args.empty() ? "" : args[0].text;
  std::string b = args.size() > 1 ? args[1].text : "";
  bool fl = is_floating(t);
  std::string one = c_literal(1, t), zero = c_literal(0, t);
  std::string e;
  switch (v.op()) {
    case Op::Cast:
      if (v.dtype() == kBool)
        e = "(" + a + " != 0)";
      else if (v.dtype() == kFloat16)
        e = "(float)(_Float16)(" + a + ")";
      else if (v.dtype() == kBFloat16)
        e = "bf2f(f2bf((float)(" + a + ")))";
      else
        e = "(" + ct + ")(" + a + ")";
      break;
    case Op::Where:
      e = "(" + a + " ? " + b + " : " + args[2].text + ")";
      break;
    case Op::Neg:
      e = "(-" + a + ")";
      break;
    case Op::Abs:
      e = fl ? fn("fabs", t) + "(" + a + ")" : "(" + a + " < 0 ? -" + a + " : " + a + ")";
      break;
    case Op::Sign:
      e = "coil_sign(" + a + ")";
      break;
    case Op::Exp:
      e = fn("exp", t) + "(" + a + ")";
      break;
    case Op::Exp2:
      e = fn("exp2", t) + "(" + a + ")";
      break;
    case Op::Expm1:
      e = fn("expm1", t) + "(" + a + ")";
      break;
    case Op::Log:
      e = fn("log", t) + "(" + a + ")";
      break;
    case Op::Log2:
      e = fn("log2", t) + "(" + a + ")";
      break;
    case Op::Log1p:
      e = fn("log1p", t) + "(" + a + ")";
      break;
    case Op::Sqrt:
      e = fn("sqrt", t) + "(" + a + ")";
      break;
    case Op::Rsqrt:
      e = "(" + one + " / " + fn("sqrt", t) + "(" + a + "))";
      break;
    case Op::Reciprocal:
      e = "(" + one + " / " + a + ")";
      break;
    case Op::Sin:
      e = fn("sin", t) + "(" + a + ")";
      break;
    case Op::Cos:
      e = fn("cos", t) + "(" + a + ")";
      break;
    case Op::Tan:
      e = fn("tan", t) + "(" + a + ")";
      break;
    case Op::Tanh:
      e = fn("tanh", t) + "(" + a + ")";
      break;
    case Op::Sigmoid:
      e = "(" + one + " / (" + one + " + " + fn("exp", t) + "(-" + a + ")))";
      break;
    case Op::Relu:
      e = "(" + a + " < " + zero + " ? " + zero + " : " + a + ")";
      break;
    case Op::Erf:
      e = fn("erf", t) + "(" + a + ")";
      break;
    case Op::Floor:
      e = fn("floor", t) + "(" + a + ")";
      break;
    case Op::Ceil:
      e = fn("ceil", t) + "(" + a + ")";
      break;
    case Op::Round:
      e = fn("nearbyint", t) + "(" + a + ")";
      break;
    case Op::Trunc:
      e = fn("trunc", t) + "(" + a + ")";
      break;
    case Op::LogicalNot:
      e = "(!" + a + ")";
      break;
    case Op::IsNan:
      e = "(" + a + " != " + a + ")";
      break;
    case Op::IsInf:
      e = "__builtin_isinf(" + a + ")";
      break;
    case Op::Add:
      e = t == kBool ? "(" + a + " | " + b + ")" : "(" + a + " + " + b + ")";
      break;
    case Op::Sub:
      e = "(" + a + " - " + b + ")";
      break;
    case Op::Mul:
      e = t == kBool ? "(" + a + " & " + b + ")" : "(" + a + " * " + b + ")";
      break;
    case Op::Div:
      e = "(" + a + " / " + b + ")";
      break;
    case Op::FloorDiv:
      e = fl           ? "coil_floordiv_float(" + a + ", " + b + ")"
          : t == kBool ? a
                       : "coil_floordiv_int(" + a + ", " + b + ")";
      break;
    case Op::Remainder:
      e = fl           ? "coil_remainder_float(" + a + ", " + b + ")"
          : t == kBool ? "false"
                       : "coil_mod_int(" + a + ", " + b + ")";
      break;
    case Op::Pow:
      e = fn("pow", t) + "(" + a + ", " + b + ")";
      break;
    case Op::Maximum:
      e = "smax(" + a + ", " + b + ")";
      break;
    case Op::Minimum:
      e = "smin(" + a + ", " + b + ")";
      break;
    case Op::Atan2:
      e = fn("atan2", t) + "(" + a + ", " + b + ")";
      break;
    case Op::Eq:
      e = "(" + a + " == " + b + ")";
      break;
    case Op::Ne:
      e = "(" + a + " != " + b + ")";
      break;
    case Op::Lt:
      e = "(" + a + " < " + b + ")";
      break;
    case Op::Le:
      e = "(" + a + " <= " + b + ")";
      break;
    case Op::Gt:
      e = "(" + a + " > " + b + ")";
      break;
    case Op::Ge:
      e = "(" + a + " >= " + b + ")";
      break;
    case Op::LogicalAnd:
      e = "(" + a + " && " + b + ")";
      break;
    case Op::LogicalOr:
      e = "(" + a + " || " + b + ")";
      break;
    default:
      throw InternalError(std::string("codegen: no scalar form of ") + ir::op_name(v.op()));
  }
  return temp(ct, e, false);
}

Emitted BodyEmitter::emit_vector_op(const ir::ValueNode& v, const std::vector<Emitted>& args) {
  std::vector<std::string> x;
  for (size_t i = 0; i < args.size(); ++i) x.push_back(varying(args[i], v.args()[i]->dtype()));
  std::string a = x.empty() ? "" : x[0], b = x.size() > 1 ? x[1] : "";
  auto sleef = [&](const char* name, const char* acc) {
    return std::string("COIL_SLEEF(") + name + ", " + acc + ")(" + a + (b.empty() ? "" : ", " + b) +
           ")";
  };
  bool mask = v.dtype() == kBool;
  std::string e;
  switch (v.op()) {
    case Op::Cast:
      if (v.dtype() == kBool)
        e = "(" + a + " != 0)";  // float -> mask
      else
        e = "vfrommask(" + a + ")";  // mask -> float
      break;
    case Op::Where:
      e = "vselect(" + a + ", " + b + ", " + x[2] + ")";
      break;
    case Op::Neg:
      e = "(-" + a + ")";
      break;
    case Op::Abs:
      e = "vabs(" + a + ")";
      break;
    case Op::Sign:
      e = "(vfrommask(" + a + " > 0) - vfrommask(" + a + " < 0))";
      break;
    case Op::Exp:
      e = "vexp(" + a + ")";
      break;
    case Op::Exp2:
      e = sleef("exp2", "_u10");
      break;
    case Op::Expm1:
      e = sleef("expm1", "_u10");
      break;
    case Op::Log:
      e = sleef("log", "_u10");
      break;
    case Op::Log2:
      e = sleef("log2", "_u10");
      break;
    case Op::Log1p:
      e = sleef("log1p", "_u10");
      break;
    case Op::Sqrt:
      e = sleef("sqrt", "_u05");
      break;
    case Op::Rsqrt:
      e = "(1.0f / " + sleef("sqrt", "_u05") + ")";
      break;
    case Op::Reciprocal:
      e = "(1.0f / " + a + ")";
      break;
    // One call gives both (sin^2 + cos^2 needs one); 3.5 ulp is far inside float32 tolerances.
    case Op::Sin:
      e = temp("vf32x2", sleef("sincos", "_u35"), true).text + ".x";
      break;
    case Op::Cos:
      e = temp("vf32x2", sleef("sincos", "_u35"), true).text + ".y";
      break;
    case Op::Tan:
      e = sleef("tan", "_u10");
      break;
    case Op::Tanh:
      e = sleef("tanh", "_u10");
      break;
    case Op::Sigmoid:
      e = "(1.0f / (1.0f + vexp(-" + a + ")))";
      break;
    case Op::Relu:
      e = "vselect(" + a + " < 0, vsplat(0.0f), " + a + ")";
      break;
    case Op::Erf:
      e = "verf(" + a + ")";
      break;
    case Op::Floor:
      e = sleef("floor", "");
      break;
    case Op::Ceil:
      e = sleef("ceil", "");
      break;
    case Op::Round:
      e = sleef("rint", "");
      break;
    case Op::Trunc:
      e = sleef("trunc", "");
      break;
    case Op::LogicalNot:
      e = "(~" + a + ")";
      break;
    case Op::IsNan:
      e = "(" + a + " != " + a + ")";
      break;
    case Op::IsInf:
      e = "(vabs(" + a + ") == __builtin_inff())";
      break;
    case Op::Add:
      e = mask ? "(" + a + " | " + b + ")" : "(" + a + " + " + b + ")";
      break;
    case Op::Sub:
      e = "(" + a + " - " + b + ")";
      break;
    case Op::Mul:
      e = mask ? "(" + a + " & " + b + ")" : "(" + a + " * " + b + ")";
      break;
    case Op::Div:
      // By a value shared by every lane (a row's sum, a count): one reciprocal, then multiplies.
      e = args[1].varying ? "(" + a + " / " + b + ")"
                          : "(" + a + " * vsplat(1.0f / " + args[1].text + "))";
      break;
    case Op::Pow:
      e = sleef("pow", "_u10");
      break;
    case Op::Maximum:
      e = "vmax(" + a + ", " + b + ")";
      break;
    case Op::Minimum:
      e = "vmin(" + a + ", " + b + ")";
      break;
    case Op::Atan2:
      e = sleef("atan2", "_u10");
      break;
    case Op::Eq:
      e = "(" + a + " == " + b + ")";
      break;
    case Op::Ne:
      e = "(" + a + " != " + b + ")";
      break;
    case Op::Lt:
      e = "(" + a + " < " + b + ")";
      break;
    case Op::Le:
      e = "(" + a + " <= " + b + ")";
      break;
    case Op::Gt:
      e = "(" + a + " > " + b + ")";
      break;
    case Op::Ge:
      e = "(" + a + " >= " + b + ")";
      break;
    case Op::LogicalAnd:
      e = "(" + a + " & " + b + ")";
      break;
    case Op::LogicalOr:
      e = "(" + a + " | " + b + ")";
      break;
    default:
      throw InternalError(std::string("codegen: no vector form of ") + ir::op_name(v.op()));
  }
  return temp(mask ? "vi32" : "vf32", e, true);
}

}  // namespace coil::codegen
