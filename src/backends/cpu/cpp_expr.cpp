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

codegen::CDialect cpp_dialect() {
  return {"__builtin_", "__builtin_nanf(\"\")", "__builtin_inff()", "__builtin_nan(\"\")",
          "__builtin_inf()"};
}

const char* memory_type(DType t) {
  if (t == DType::Float16) return "_Float16";
  if (t == DType::BFloat16) return "bf16";
  return compute_type(t);
}

bool vector_lane_type(DType t) { return t == kFloat32 || t == kBFloat16 || t == kFloat16; }

std::string vector_load(DType t) {
  return t == kBFloat16 ? "vload_bf16" : t == kFloat16 ? "vload_f16" : "vload";
}
std::string vector_store(DType t) {
  return t == kBFloat16 ? "vstore_bf16" : t == kFloat16 ? "vstore_f16" : "vstore";
}

std::string c_literal(const Scalar& s, DType dtype) {
  static const codegen::CDialect cpp = cpp_dialect();
  return codegen::c_literal(s, dtype, cpp);
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

// An integer value made of index values and integer constants (arange's x1 * 1 + 0): the
// expression it computes, or null.
sym::Expr index_expr(const ir::Value& v) {
  if (!is_integral(v->dtype())) return nullptr;
  if (v->op() == Op::Index) return v->index();
  if (v->op() == Op::Constant) return sym::constant(v->constant().to_int());
  if (v->op() != Op::Add && v->op() != Op::Sub && v->op() != Op::Mul) return nullptr;
  sym::Expr a = index_expr(v->args()[0]), b = index_expr(v->args()[1]);
  if (!a || !b) return nullptr;
  if (v->op() == Op::Add) return a + b;
  if (v->op() == Op::Sub) return a - b;
  return a->is_const() || b->is_const() ? a * b : nullptr;
}

// The comparison ops, and each one's mirror (a < b as b > a).
std::optional<Op> mirrored_comparison(Op op) {
  switch (op) {
    case Op::Eq:
    case Op::Ne:
      return op;
    case Op::Lt:
      return Op::Gt;
    case Op::Le:
      return Op::Ge;
    case Op::Gt:
      return Op::Lt;
    case Op::Ge:
      return Op::Le;
    default:
      return std::nullopt;
  }
}

}  // namespace

std::optional<LaneComparison> lane_comparison(const ir::ValueNode& v, sym::Expr lane) {
  if (!mirrored_comparison(v.op()) || v.args().size() != 2) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const ir::Value& other = v.args()[1 - side];
    sym::Expr index = index_expr(v.args()[side]);
    int64_t stride = 0;
    if (!index || !sym::constant_stride(index, lane, &stride) || stride != 1 ||
        !is_integral(other->dtype()))
      continue;
    return LaneComparison{side == 0 ? v.op() : *mirrored_comparison(v.op()), index, 1 - side};
  }
  return std::nullopt;
}

bool vectorizable(const ir::Value& v, sym::Expr lane) {
  bool ok = true;
  std::unordered_map<const ir::ValueNode*, bool> varying;
  std::function<bool(const ir::Value&)> visit = [&](const ir::Value& n) -> bool {
    if (auto it = varying.find(n.get()); it != varying.end()) return it->second;
    // A lane's index against a value the same for every lane: a mask of lanes, without the
    // index as a vector of integers.
    if (auto c = lane_comparison(*n, lane); c && !visit(n->args()[c->other])) {
      varying[n.get()] = true;
      return true;
    }
    bool var = depends_on_lane(*n, lane);
    for (const ir::Value& a : n->args()) var = visit(a) || var;
    if (var) {
      // Lanes of float32 (16-bit floats held as float32, rounded to their dtype) or masks.
      DType t = n->dtype();
      if (!vector_lane_type(t) && t != kBool) ok = false;
      if (n->op() == Op::Index || !vector_op(n->op())) ok = false;
      if (n->op() == Op::Load && !vector_lane_type(t)) ok = false;
      if (n->op() == Op::Cast && !vector_lane_type(n->args()[0]->dtype()) &&
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
    Emitted i =
        temp("i64",
             "coil_checked_index(" + args[k].text + ", " + codegen::bound_text(check.bound) + ", " +
                 std::to_string(it - checks->begin()) + ", index_error)",
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
    return temp("vf32", vector_load(t) + "(" + buf + " + " + sym::to_c(index) + ")", true);
  // The same element for every lane: read once, at the step's first lane (lane_ itself).
  if (form == LaneForm::Uniform) return temp(compute_type(t), scalar_read(sym::to_c(index)), false);
  // A gather: each lane computes its own index.
  sym::Expr k = sym::var("k_", sym::Range{0, 15});
  sym::Expr at = sym::substitute(index, {{lane_, lane_ + k}});
  const std::string gathered = buf + "[" + sym::to_c(at) + "]";
  if (auto it = cse_.find(gathered); it != cse_.end()) return it->second;  // gathered once
  Emitted e{"t" + std::to_string(counter_++), true};
  line("vf32 " + e.text + ";");
  line("for (int k_ = 0; k_ < COIL_VEC; ++k_) " + e.text + "[k_] = " + scalar_read(sym::to_c(at)) +
       ";");
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
  if (lane_) {
    if (auto c = lane_comparison(v, lane_); c && !a[c->other].varying) {
      // Lane k holds index + k: it compares as k against other - index, clamped to the lanes'
      // range and one past it on each side (which keeps every comparison's answer).
      static const std::map<Op, const char*> ops = {{Op::Eq, "=="}, {Op::Ne, "!="}, {Op::Lt, "<"},
                                                    {Op::Le, "<="}, {Op::Gt, ">"},  {Op::Ge, ">="}};
      return temp("vi32",
                  std::string("(vlanes() ") + ops.at(c->op) + " vlane_offset(" + a[c->other].text +
                      " - (" + sym::to_c(c->index) + ")))",
                  true);
    }
  }
  bool var = false;
  for (const Emitted& e : a) var |= e.varying;
  return var ? emit_vector_op(v, a) : emit_scalar_op(v, a);
}

namespace {

// How each op prints in vector mode, as a template over its operands $a, $b, $c: operators on
// GCC vector types, coil's inline exp/erf and SLEEF. An op without one never runs in vector
// mode (vectorizable() keeps it out).
const std::map<Op, const char*>& vector_forms() {
  static const std::map<Op, const char*> m = {
      {Op::Where, "vselect($a, $b, $c)"},
      {Op::Neg, "(-$a)"},
      {Op::Abs, "vabs($a)"},
      {Op::Sign, "(vfrommask($a > 0) - vfrommask($a < 0))"},
      {Op::Exp, "vexp($a)"},
      {Op::Exp2, "COIL_SLEEF(exp2, _u10)($a)"},
      {Op::Expm1, "COIL_SLEEF(expm1, _u10)($a)"},
      {Op::Log, "COIL_SLEEF(log, _u10)($a)"},
      {Op::Log2, "COIL_SLEEF(log2, _u10)($a)"},
      {Op::Log1p, "COIL_SLEEF(log1p, _u10)($a)"},
      {Op::Sqrt, "COIL_SLEEF(sqrt, _u05)($a)"},
      {Op::Rsqrt, "(1.0f / COIL_SLEEF(sqrt, _u05)($a))"},
      {Op::Reciprocal, "(1.0f / $a)"},
      {Op::Sin, "$sincos.x"},
      {Op::Cos, "$sincos.y"},
      {Op::Tan, "COIL_SLEEF(tan, _u10)($a)"},
      {Op::Tanh, "vtanh($a)"},
      {Op::Sigmoid, "(1.0f / (1.0f + vexp(-$a)))"},
      {Op::Relu, "vselect($a < 0, vsplat(0.0f), $a)"},
      {Op::Erf, "verf($a)"},
      {Op::Floor, "COIL_SLEEF(floor, )($a)"},
      {Op::Ceil, "COIL_SLEEF(ceil, )($a)"},
      {Op::Round, "COIL_SLEEF(rint, )($a)"},
      {Op::Trunc, "COIL_SLEEF(trunc, )($a)"},
      {Op::LogicalNot, "(~$a)"},
      {Op::IsNan, "($a != $a)"},
      {Op::IsInf, "(vabs($a) == __builtin_inff())"},
      {Op::SoftmaxExp, "vsoftmax_exp($a)"},
      {Op::Add, "($a + $b)"},
      {Op::Sub, "($a - $b)"},
      {Op::Mul, "($a * $b)"},
      {Op::Div, "($a / $b)"},
      {Op::Pow, "COIL_SLEEF(pow, _u10)($a, $b)"},
      {Op::Maximum, "vmax($a, $b)"},
      {Op::Minimum, "vmin($a, $b)"},
      {Op::Atan2, "COIL_SLEEF(atan2, _u10)($a, $b)"},
      {Op::Eq, "($a == $b)"},
      {Op::Ne, "($a != $b)"},
      {Op::Lt, "($a < $b)"},
      {Op::Le, "($a <= $b)"},
      {Op::Gt, "($a > $b)"},
      {Op::Ge, "($a >= $b)"},
      {Op::LogicalAnd, "($a & $b)"},
      {Op::LogicalOr, "($a | $b)"},
      {Op::SoftmaxDiv, "vsoftmax_div($a, 1.0f / $b, $b)"},
  };
  return m;
}

}  // namespace

Emitted BodyEmitter::emit_scalar_op(const ir::ValueNode& v, const std::vector<Emitted>& args) {
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
  static const codegen::CDialect cpp = cpp_dialect();
  return temp(ct, codegen::scalar_op(v, x, cpp), false);
}

Emitted BodyEmitter::emit_vector_op(const ir::ValueNode& v, const std::vector<Emitted>& args) {
  std::vector<std::string> x;
  for (size_t i = 0; i < args.size(); ++i) x.push_back(varying(args[i], v.args()[i]->dtype()));
  bool mask = v.dtype() == kBool;
  std::string e;
  if (v.op() == Op::Cast) {
    // Vector lanes are masks or float32; a 16-bit value is a float32 rounded to its dtype.
    const DType from = v.args()[0]->dtype();
    COIL_ASSERT(mask || is_floating(v.dtype()), "codegen: no vector cast to ",
                dtype_name(v.dtype()));
    e = mask                     ? "(" + x[0] + " != 0)"
        : from == kBool          ? "vfrommask(" + x[0] + ")"
        : v.dtype() == kBFloat16 ? "vround_bf16(" + x[0] + ")"
        : v.dtype() == kFloat16  ? "vround_f16(" + x[0] + ")"
                                 : x[0];
  } else if (v.op() == Op::Div && !args[1].varying) {
    // By a value shared by every lane (a row's sum, a count): one reciprocal, then multiplies.
    e = "(" + x[0] + " * vsplat(1.0f / " + args[1].text + "))";
  } else if (v.op() == Op::SoftmaxDiv && !args[1].varying) {
    e = "vsoftmax_div(" + x[0] + ", vsplat(1.0f / " + args[1].text + "), vsplat(" + args[1].text +
        "))";
  } else {
    auto it = vector_forms().find(v.op());
    COIL_ASSERT(it != vector_forms().end(), "codegen: no vector form of ", ir::op_name(v.op()));
    const char* form = mask && (v.op() == Op::Add || v.op() == Op::Mul)
                           ? (v.op() == Op::Add ? "($a | $b)" : "($a & $b)")
                           : it->second;
    std::map<char, std::string> extra;
    if (v.op() == Op::Sin || v.op() == Op::Cos)
      extra['s'] = temp("vf32x2", "vsincos(" + x[0] + ")", true).text;
    e = codegen::expand_form(form, x, extra);
  }
  return temp(mask ? "vi32" : "vf32", e, true);
}

}  // namespace coil::cpu
