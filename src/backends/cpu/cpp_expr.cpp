#include "backends/cpu/cpp_expr.h"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <cstdio>
#include <map>
#include <mutex>

#include <coil/error.h>

namespace coil::cpu {

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

BodyEmitter::BodyEmitter(codegen::CodeWriter& w, sym::Expr lane, int& counter)
    : w_(w), lane_(lane), counter_(counter) {}

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

// An indirect load's index with each of its symbols replaced by a checked copy of the value
// it stands for: out of range, the copy is 0 (a valid address) and the error record is set.
sym::Expr BodyEmitter::checked_index(const ir::ValueNode& v, const std::vector<Emitted>& args) {
  COIL_ASSERT(checks, "codegen: an indirect load in a body with no error record");
  sym::Bindings at;
  for (size_t k = 0; k < args.size(); ++k) {
    // vectorizable() keeps varying integers, hence varying index values, out of vector mode.
    COIL_ASSERT(!args[k].varying, "codegen: a vector index value for ", v.buffer());
    const IndexCheck check{v.bounds_op(), v.index_bounds()[k]};
    auto it = std::find(checks->begin(), checks->end(), check);
    if (it == checks->end()) it = checks->insert(it, check);
    Emitted i = temp("i64",
                     "coil_checked_index(" + args[k].text + ", " + std::to_string(check.bound) +
                         "LL, " + std::to_string(it - checks->begin()) + ", index_error)",
                     false);
    at.emplace(ir::ValueNode::indirect_var(k, check.bound), sym::index_var(i.text, check.bound));
  }
  return sym::substitute(v.index(), at);
}

namespace {

// How an index that the lane variable enters through a floordiv or mod still reads within one
// vector step: the steps start at multiples of COIL_VEC (16, 8 or 4: every vector loop starts
// at 0, or at a chunk of 256, and advances by whole vectors), so (r0 + k) // 256 is the same
// for every lane k of a step and (r0 + k) % 256 is r0 % 256 + k. Decided by evaluating the
// index's lane part over the lane's whole range (when it is not too long) in every aligned
// group of 4, 8 and 16 lanes; the part must not mix the lane with other variables.
enum class LaneForm { Gather, Uniform, Contiguous };

LaneForm evaluate_lane_form(sym::Expr part, sym::Expr lane) {
  constexpr int64_t kMaxLanes = 4096;
  for (const sym::Expr& v : sym::free_vars(part))
    if (v != lane) return LaneForm::Gather;
  const sym::Range r = lane->range();
  if (r.lo != 0 || r.hi + 1 > kMaxLanes) return LaneForm::Gather;
  std::vector<int64_t> at(static_cast<size_t>(r.hi + 1));
  for (int64_t i = 0; i <= r.hi; ++i) at[static_cast<size_t>(i)] = sym::evaluate(part, {{lane, i}});
  bool uniform = true, contiguous = true;
  for (int64_t w : {4, 8, 16})
    for (int64_t g = 0; g + w <= r.hi + 1; g += w)
      for (int64_t k = 1; k < w; ++k) {
        const int64_t d = at[static_cast<size_t>(g + k)] - at[static_cast<size_t>(g)];
        uniform = uniform && d == 0;
        contiguous = contiguous && d == k;
      }
  return uniform ? LaneForm::Uniform : contiguous ? LaneForm::Contiguous : LaneForm::Gather;
}

// Remembered per lane part (expressions are interned): a row kernel reads many buffers at the
// same (r0 + k) // 256, and its compile would evaluate it for each.
LaneForm lane_form(sym::Expr index, sym::Expr lane) {
  const sym::Expr part = sym::sub(index, sym::substitute(index, {{lane, sym::constant(0)}}));
  static std::mutex mu;
  static std::map<std::pair<const sym::Node*, const sym::Node*>, LaneForm> known;
  const std::pair<const sym::Node*, const sym::Node*> key{part.get(), lane.get()};
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = known.find(key); it != known.end()) return it->second;
  }
  const LaneForm form = evaluate_lane_form(part, lane);
  std::lock_guard<std::mutex> lock(mu);
  known.emplace(key, form);
  return form;
}

}  // namespace

Emitted BodyEmitter::emit_load(const ir::ValueNode& v, const std::vector<Emitted>& args) {
  // An indirect load reads its buffer at another point than the one computed here.
  if (!v.is_indirect()) {
    if (auto it = forwarded_.find(v.buffer()); it != forwarded_.end()) return it->second;
    if (recompute)
      if (std::optional<ir::Value> body = recompute(v.buffer())) return emit(*body);
  }
  const sym::Expr index = v.is_indirect() ? checked_index(v, args) : v.index();
  DType t = v.dtype();
  const std::string& buf = v.buffer();
  auto scalar_read = [&](const std::string& index) {
    std::string at = buf + "[" + index + "]";
    if (t == kBFloat16) return "bf2f(" + at + ")";
    if (t == kFloat16) return "(float)" + at;
    return at;
  };
  bool var = lane_ && sym::depends_on(index, lane_);
  if (!var) return temp(compute_type(t), scalar_read(sym::to_c(index)), false);
  int64_t stride = 0;
  const bool affine = sym::constant_stride(index, lane_, &stride);
  const LaneForm form = affine ? LaneForm::Gather : lane_form(index, lane_);
  if ((affine && stride == 1) || form == LaneForm::Contiguous)
    return temp("vf32", "vload(" + buf + " + " + sym::to_c(index) + ")", true);
  // The same element for every lane: read once, at the step's first lane (lane_ itself).
  if (form == LaneForm::Uniform) return temp(compute_type(t), scalar_read(sym::to_c(index)), false);
  // A gather: each lane computes its own index.
  sym::Expr k = sym::var("k_", sym::Range{0, 15});
  sym::Expr at = sym::substitute(index, {{lane_, lane_ + k}});
  const std::string gathered = buf + "[" + sym::to_c(at) + "]";
  if (auto it = cse_.find(gathered); it != cse_.end()) return it->second;  // gathered once
  Emitted e{"t" + std::to_string(counter_++), true};
  line("vf32 " + e.text + ";");
  line("for (int k_ = 0; k_ < COIL_VEC; ++k_) " + e.text + "[k_] = " + gathered + ";");
  cse_.emplace(gathered, e);
  return e;
}

Emitted BodyEmitter::emit_node(const ir::ValueNode& v, const std::vector<Emitted>& a) {
  switch (v.op()) {
    case Op::Load:
      return emit_load(v, a);
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

// How each op prints, as a template over its operands $a, $b, $c. Scalar forms use libm
// builtins, where $f is the suffix of the compute type ("f" for float, "" for double);
// vector forms use operators on GCC vector types, coil's inline exp/erf and SLEEF. An empty
// vector form means the op never runs in vector mode (vectorizable() keeps it out).
struct Forms {
  const char* scalar;
  const char* vector;
};

const std::map<Op, Forms>& forms() {
  static const std::map<Op, Forms> m = {
      {Op::Where, {"($a ? $b : $c)", "vselect($a, $b, $c)"}},
      {Op::Neg, {"(-$a)", "(-$a)"}},
      {Op::Abs, {"__builtin_fabs$f($a)", "vabs($a)"}},
      {Op::Sign, {"coil_sign($a)", "(vfrommask($a > 0) - vfrommask($a < 0))"}},
      {Op::Exp, {"__builtin_exp$f($a)", "vexp($a)"}},
      {Op::Exp2, {"__builtin_exp2$f($a)", "COIL_SLEEF(exp2, _u10)($a)"}},
      {Op::Expm1, {"__builtin_expm1$f($a)", "COIL_SLEEF(expm1, _u10)($a)"}},
      {Op::Log, {"__builtin_log$f($a)", "COIL_SLEEF(log, _u10)($a)"}},
      {Op::Log2, {"__builtin_log2$f($a)", "COIL_SLEEF(log2, _u10)($a)"}},
      {Op::Log1p, {"__builtin_log1p$f($a)", "COIL_SLEEF(log1p, _u10)($a)"}},
      {Op::Sqrt, {"__builtin_sqrt$f($a)", "COIL_SLEEF(sqrt, _u05)($a)"}},
      {Op::Rsqrt, {"($1 / __builtin_sqrt$f($a))", "(1.0f / COIL_SLEEF(sqrt, _u05)($a))"}},
      {Op::Reciprocal, {"($1 / $a)", "(1.0f / $a)"}},
      // One sincos gives both (sin^2 + cos^2 needs one): coil's inline one (prelude's
      // vsincos, 2.8 ulp), SLEEF's for vectors with large arguments.
      {Op::Sin, {"__builtin_sin$f($a)", "$sincos.x"}},
      {Op::Cos, {"__builtin_cos$f($a)", "$sincos.y"}},
      {Op::Tan, {"__builtin_tan$f($a)", "COIL_SLEEF(tan, _u10)($a)"}},
      {Op::Tanh, {"__builtin_tanh$f($a)", "COIL_SLEEF(tanh, _u10)($a)"}},
      {Op::Sigmoid, {"($1 / ($1 + __builtin_exp$f(-$a)))", "(1.0f / (1.0f + vexp(-$a)))"}},
      {Op::Relu, {"($a < $0 ? $0 : $a)", "vselect($a < 0, vsplat(0.0f), $a)"}},
      {Op::Erf, {"__builtin_erf$f($a)", "verf($a)"}},
      {Op::Floor, {"__builtin_floor$f($a)", "COIL_SLEEF(floor, )($a)"}},
      {Op::Ceil, {"__builtin_ceil$f($a)", "COIL_SLEEF(ceil, )($a)"}},
      {Op::Round, {"__builtin_nearbyint$f($a)", "COIL_SLEEF(rint, )($a)"}},
      {Op::Trunc, {"__builtin_trunc$f($a)", "COIL_SLEEF(trunc, )($a)"}},
      {Op::LogicalNot, {"(!$a)", "(~$a)"}},
      {Op::IsNan, {"($a != $a)", "($a != $a)"}},
      {Op::IsInf, {"__builtin_isinf($a)", "(vabs($a) == __builtin_inff())"}},
      {Op::SoftmaxExp, {"coil_softmax_exp($a)", "vsoftmax_exp($a)"}},
      {Op::Add, {"($a + $b)", "($a + $b)"}},
      {Op::Sub, {"($a - $b)", "($a - $b)"}},
      {Op::Mul, {"($a * $b)", "($a * $b)"}},
      {Op::Div, {"($a / $b)", "($a / $b)"}},
      {Op::FloorDiv, {"coil_floordiv_float($a, $b)", ""}},
      {Op::Remainder, {"coil_remainder_float($a, $b)", ""}},
      {Op::Pow, {"__builtin_pow$f($a, $b)", "COIL_SLEEF(pow, _u10)($a, $b)"}},
      {Op::Maximum, {"smax($a, $b)", "vmax($a, $b)"}},
      {Op::Minimum, {"smin($a, $b)", "vmin($a, $b)"}},
      {Op::Atan2, {"__builtin_atan2$f($a, $b)", "COIL_SLEEF(atan2, _u10)($a, $b)"}},
      {Op::Eq, {"($a == $b)", "($a == $b)"}},
      {Op::Ne, {"($a != $b)", "($a != $b)"}},
      {Op::Lt, {"($a < $b)", "($a < $b)"}},
      {Op::Le, {"($a <= $b)", "($a <= $b)"}},
      {Op::Gt, {"($a > $b)", "($a > $b)"}},
      {Op::Ge, {"($a >= $b)", "($a >= $b)"}},
      {Op::LogicalAnd, {"($a && $b)", "($a & $b)"}},
      {Op::LogicalOr, {"($a || $b)", "($a | $b)"}},
      {Op::SoftmaxDiv, {"coil_softmax_div($a, $b)", "vsoftmax_div($a, 1.0f / $b, $b)"}},
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

std::string expand(const char* form, const std::vector<std::string>& x,
                   const std::map<char, std::string>& extra) {
  std::string out;
  for (const char* p = form; *p; ++p) {
    if (*p != '$') {
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

}  // namespace

Emitted BodyEmitter::emit_scalar_op(const ir::ValueNode& v, const std::vector<Emitted>& args) {
  DType t = v.args()[0]->dtype();  // the operands' dtype
  std::string ct = compute_type(v.dtype());
  std::vector<std::string> x;
  for (const Emitted& e : args) x.push_back(e.text);
  if (v.op() == Op::Cast) {
    const std::string& a = x[0];
    if (v.dtype() == kBool) return temp(ct, "(" + a + " != 0)", false);
    if (v.dtype() == kFloat16) return temp(ct, "(float)(_Float16)(" + a + ")", false);
    if (v.dtype() == kBFloat16) return temp(ct, "bf2f(f2bf((float)(" + a + ")))", false);
    return temp(ct, "(" + ct + ")(" + a + ")", false);
  }
  auto it = forms().find(v.op());
  COIL_ASSERT(it != forms().end(), "codegen: no form of ", ir::op_name(v.op()));
  const char* form = is_floating(t) ? nullptr : integral_form(v.op(), t);
  std::map<char, std::string> extra = {
      {'f', t == kFloat64 ? "" : "f"}, {'0', c_literal(0, t)}, {'1', c_literal(1, t)}};
  return temp(ct, expand(form ? form : it->second.scalar, x, extra), false);
}

Emitted BodyEmitter::emit_vector_op(const ir::ValueNode& v, const std::vector<Emitted>& args) {
  std::vector<std::string> x;
  for (size_t i = 0; i < args.size(); ++i) x.push_back(varying(args[i], v.args()[i]->dtype()));
  bool mask = v.dtype() == kBool;
  std::string e;
  if (v.op() == Op::Cast) {
    e = mask ? "(" + x[0] + " != 0)" : "vfrommask(" + x[0] + ")";  // float <-> mask
  } else if (v.op() == Op::Div && !args[1].varying) {
    // By a value shared by every lane (a row's sum, a count): one reciprocal, then multiplies.
    e = "(" + x[0] + " * vsplat(1.0f / " + args[1].text + "))";
  } else if (v.op() == Op::SoftmaxDiv && !args[1].varying) {
    e = "vsoftmax_div(" + x[0] + ", vsplat(1.0f / " + args[1].text + "), vsplat(" + args[1].text +
        "))";
  } else {
    auto it = forms().find(v.op());
    COIL_ASSERT(it != forms().end() && *it->second.vector, "codegen: no vector form of ",
                ir::op_name(v.op()));
    const char* form = mask && (v.op() == Op::Add || v.op() == Op::Mul)
                           ? (v.op() == Op::Add ? "($a | $b)" : "($a & $b)")
                           : it->second.vector;
    std::map<char, std::string> extra;
    if (v.op() == Op::Sin || v.op() == Op::Cos)
      extra['s'] = temp("vf32x2", "vsincos(" + x[0] + ")", true).text;
    e = expand(form, x, extra);
  }
  return temp(mask ? "vi32" : "vf32", e, true);
}

}  // namespace coil::cpu
