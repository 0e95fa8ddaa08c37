#include "backends/cuda/cuda_expr.h"

#include <algorithm>

#include <coil/error.h>

namespace coil::cuda {

using codegen::compute_type;
using ir::Op;

const char* memory_type(DType t) {
  if (t == kFloat16 || t == kBFloat16) return "unsigned short";
  return compute_type(t);
}

codegen::CDialect cuda_dialect() {
  return {"", "coil_nan_f()", "coil_inf_f()", "coil_nan_d()", "coil_inf_d()"};
}

std::string cuda_literal(const Scalar& s, DType dtype) {
  static const codegen::CDialect d = cuda_dialect();
  return codegen::c_literal(s, dtype, d);
}

std::string to_memory(DType dtype, const std::string& value) {
  if (dtype == kFloat16) return "coil_f2h(" + value + ")";
  if (dtype == kBFloat16) return "coil_f2bf(" + value + ")";
  return "(" + std::string(memory_type(dtype)) + ")(" + value + ")";
}

std::string from_memory(DType dtype, const std::string& at) {
  if (dtype == kFloat16) return "coil_h2f(" + at + ")";
  if (dtype == kBFloat16) return "coil_bf2f(" + at + ")";
  return "(" + std::string(codegen::compute_type(dtype)) + ")(" + at + ")";
}

std::string CudaEmitter::temp(const std::string& type, const std::string& expr) {
  std::string key = type + "=" + expr;
  if (auto it = cse_.find(key); it != cse_.end()) return it->second;
  std::string name = "t" + std::to_string(counter_++);
  line(type + " " + name + " = " + expr + ";");
  cse_.emplace(std::move(key), name);
  return name;
}

std::string CudaEmitter::index(sym::Expr e) {
  if (!divider) return sym::to_c(e);
  return sym::to_c(
      e,
      [this](bool is_div, sym::Expr numerator, const std::string& n, sym::Expr d) -> std::string {
        // Within 32 bits a division by a constant is a multiply-high and a shift; in 64 bits it is
        // a dozen instructions, which bound a kernel that divides each element's index (the row of
        // a loss's gradient over a vocabulary of 50257).
        if (d->is_const())
          return numerator->range().hi <= INT32_MAX && d->value() <= INT32_MAX
                     ? std::string(is_div ? "coil_div32(" : "coil_mod32(") + n + ", " +
                           std::to_string(d->value()) + ")"
                     : "";
        const std::string v = divider(d);
        const std::string q = temp("i64", "coil_udiv(" + n + ", " + v + ")");
        return is_div ? q : temp("i64", "(" + n + ") - " + q + " * " + v + ".d");
      });
}

std::string CudaEmitter::emit(const ir::Value& v) {
  if (auto it = memo_.find(v.get()); it != memo_.end()) return it->second;
  if (depth_ == 0) {  // a body: the operands it takes both the sine and the cosine of
    std::unordered_set<std::string> sines, cosines;
    ir::any_node(v, [&](const ir::ValueNode& n) {
      if (n.op() == Op::Sin) sines.insert(ir::to_string(n.args()[0]));
      if (n.op() == Op::Cos) cosines.insert(ir::to_string(n.args()[0]));
      return false;
    });
    for (const std::string& a : sines)
      if (cosines.count(a)) sincos_args_.insert(a);
  }
  std::vector<std::string> args;
  ++depth_;
  for (const ir::Value& a : v->args()) args.push_back(emit(a));
  --depth_;
  std::string e = emit_node(*v, args);
  memo_.emplace(v.get(), e);
  return e;
}

std::string CudaEmitter::sincos(const ir::ValueNode& v, const std::string& arg) {
  auto it = sincos_.find(arg);
  if (it == sincos_.end()) {
    const DType t = v.args()[0]->dtype();
    const std::string s = "t" + std::to_string(counter_++), c = "t" + std::to_string(counter_++);
    line(std::string(compute_type(v.dtype())) + " " + s + ", " + c + ";");
    line(std::string(t == kFloat64 ? "sincos" : "sincosf") + "(" + arg + ", &" + s + ", &" + c +
         ");");
    it = sincos_.emplace(arg, std::make_pair(s, c)).first;
  }
  return v.op() == Op::Sin ? it->second.first : it->second.second;
}

std::string CudaEmitter::emit_load(const ir::ValueNode& v, const std::vector<std::string>& args) {
  // An indirect load reads its buffer at another point than the one computed here.
  if (!v.is_indirect()) {
    if (auto it = forwarded_.find(v.buffer()); it != forwarded_.end()) return it->second;
    if (recompute)
      if (std::optional<ir::Value> body = recompute(v.buffer())) return emit(*body);
    if (load_override)
      if (std::optional<std::string> value = load_override(v))
        return temp(compute_type(v.dtype()), *value);
  }
  sym::Expr where = v.index();
  if (v.is_indirect()) {
    // Each index value's symbol replaced by a checked copy of the value: out of range, the
    // copy is 0 (a valid address) and the error record is set.
    COIL_ASSERT(checks, "codegen: an indirect load in a body with no error record");
    sym::Bindings at;
    for (size_t k = 0; k < args.size(); ++k) {
      const codegen::IndexCheck check{v.bounds_op(), v.index_bounds()[k]};
      auto it = std::find(checks->begin(), checks->end(), check);
      if (it == checks->end()) it = checks->insert(it, check);
      std::string i =
          temp("i64", "coil_checked_index(" + args[k] + ", " + codegen::bound_text(check.bound) +
                          ", " + std::to_string(it - checks->begin()) + ", index_error)");
      at.emplace(ir::ValueNode::indirect_var(k, check.bound), sym::index_var(i, check.bound));
    }
    where = sym::substitute(where, at);
  }
  std::string at = v.buffer() + "[" + index(where) + "]";
  if (!v.is_indirect() && stream_load && stream_load(v)) at = "coil_ld_stream(&" + at + ")";
  const DType t = v.dtype();
  if (t == kFloat16) return temp("float", "coil_h2f(" + at + ")");
  if (t == kBFloat16) return temp("float", "coil_bf2f(" + at + ")");
  return temp(compute_type(t), at);
}

std::string CudaEmitter::emit_node(const ir::ValueNode& v, const std::vector<std::string>& x) {
  const std::string ct = compute_type(v.dtype());
  switch (v.op()) {
    case Op::Load:
      return emit_load(v, x);
    case Op::Constant:
      return cuda_literal(v.constant(), v.dtype());
    case Op::Index:
      return temp("i64", index(run_index ? run_index(v.index()) : v.index()));
    case Op::Cast:
      if (v.dtype() == kBool) return temp(ct, "(" + x[0] + " != 0)");
      if (v.dtype() == kFloat16) return temp(ct, "coil_h2f(coil_f2h((float)(" + x[0] + ")))");
      if (v.dtype() == kBFloat16) return temp(ct, "coil_bf2f(coil_f2bf((float)(" + x[0] + ")))");
      return temp(ct, "(" + ct + ")(" + x[0] + ")");
    case Op::Sin:
    case Op::Cos:
      if (sincos_args_.count(ir::to_string(v.args()[0]))) return sincos(v, x[0]);
      [[fallthrough]];
    case Op::Rsqrt:
      // In float, CUDA's rsqrtf (one special-function instruction, within 2 ulp, as PyTorch's
      // CUDA kernels): 1 / sqrtf, a correctly rounded root and division, is tens of
      // instructions, which a batch norm's scale repeats for every element.
      if (v.op() == Op::Rsqrt && ct == std::string("float"))
        return temp(ct, "rsqrtf(" + x[0] + ")");
      [[fallthrough]];
    default: {
      static const codegen::CDialect d = cuda_dialect();
      return temp(ct, codegen::scalar_op(v, x, d));
    }
  }
}

// The value a reduction starts from.
std::string reduce_identity(ir::ReduceKind k, DType t) {
  const bool max = k == ir::ReduceKind::Max || k == ir::ReduceKind::ArgMax;
  switch (k) {
    case ir::ReduceKind::Sum:
      return cuda_literal(0, t);
    case ir::ReduceKind::Prod:
      return cuda_literal(1, t);
    case ir::ReduceKind::Any:
      return "false";
    case ir::ReduceKind::All:
      return "true";
    default:
      break;
  }
  static const codegen::CDialect d = cuda_dialect();
  return codegen::c_extreme(t, max, d);
}

const char* reduce_fold(ir::ReduceKind k) {
  switch (k) {
    case ir::ReduceKind::Sum:
      return "coil_sum{}";
    case ir::ReduceKind::Prod:
      return "coil_prod{}";
    case ir::ReduceKind::Max:
      return "coil_max{}";
    case ir::ReduceKind::Min:
      return "coil_min{}";
    case ir::ReduceKind::Any:
      return "coil_or{}";
    case ir::ReduceKind::All:
      return "coil_and{}";
    default:
      throw InternalError("codegen: no CUDA fold for this reduction");
  }
}

}  // namespace coil::cuda
