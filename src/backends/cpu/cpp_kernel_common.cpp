#include "backends/cpu/cpp_kernel_common.h"

#include "backends/cpu/cpp_accumulator.h"
#include "runtime/tensor_impl.h"

namespace coil::cpu {

using ir::ReduceKind;

bool is_expensive(ir::Op op) {
  using ir::Op;
  switch (op) {
    case Op::Exp:
    case Op::SoftmaxExp:
    case Op::Exp2:
    case Op::Expm1:
    case Op::Log:
    case Op::Log2:
    case Op::Log1p:
    case Op::Sin:
    case Op::Cos:
    case Op::Tan:
    case Op::Tanh:
    case Op::Sigmoid:
    case Op::Erf:
    case Op::Pow:
    case Op::Atan2:
      return true;
    default:
      return false;
  }
}

bool computes_transcendentals(const std::vector<const KernelNode*>& nodes) {
  bool found = false;
  for (const KernelNode* n : nodes)
    ir::any_node(n->body, [&](const ir::ValueNode& v) { return found |= is_expensive(v.op()); });
  return found;
}

std::string loop_head(sym::Expr var, const std::string& lo, const std::string& hi) {
  std::string v = sym::to_string(var);
  return "for (i64 " + v + " = " + lo + "; " + v + " < " + hi + "; ++" + v + ")";
}

std::string store_stmt(const KernelNode& n, const std::string& index, const std::string& value) {
  std::string at = n.buffer + "[" + index + "]";
  if (n.dtype == kBFloat16) return at + " = f2bf(" + value + ");";
  return at + " = (" + std::string(memory_type(n.dtype)) + ")(" + value + ");";
}

std::string function_head(const std::string& name, const std::vector<std::string>& args,
                          const std::set<std::string>& written, const ir::Program& p,
                          const std::vector<codegen::IndexCheck>& checks,
                          const std::vector<sym::Expr>& symbols,
                          const std::vector<std::pair<std::string, std::string>>& inplace) {
  std::set<std::string> aliased;
  for (const auto& [w, r] : inplace) aliased.insert({w, r});
  std::string head = "extern \"C\" void " + name + "(void* const* args) {\n";
  for (size_t i = 0; i < args.size(); ++i) {
    const bool w = written.count(args[i]) > 0;
    std::string type = memory_type(p.buffer(args[i]).layout.dtype);
    head += "  " + std::string(w ? "" : "const ") + type +
            (aliased.count(args[i]) ? "* " : "* __restrict ") + args[i] + " = (" +
            (w ? "" : "const ") + type + "*)args[" + std::to_string(i) + "];\n";
  }
  if (!checks.empty())
    head += "  i64* index_error = (i64*)args[" + std::to_string(args.size()) + "];\n";
  if (!symbols.empty()) {
    const size_t at = args.size() + (checks.empty() ? 0 : 1);
    head += "  const i64* sizes_ = (const i64*)args[" + std::to_string(at) + "];\n";
    for (sym::Expr s : symbols)
      head +=
          "  const i64 " + s->name() + " = sizes_[" + std::to_string(size_symbol_index(s)) + "];\n";
  }
  return head;
}

int64_t LoopEmitter::hint(sym::Expr e) const { return p_.hint(e); }

int64_t LoopEmitter::hint_numel(const SymShape& s) const { return p_.hint(sym_numel(s)); }

LoopEmitter::LoopEmitter(const Kernel& k, const ir::Program& p, bool in_region,
                         std::vector<codegen::IndexCheck>* checks)
    : k_(k), p_(p), in_region_(in_region), checks_(checks) {
  for (const KernelNode& n : k.nodes) nodes_[n.buffer] = &n;
}

BodyEmitter LoopEmitter::emitter(CodeWriter& w, bool vector) {
  BodyEmitter em(w, vector ? lane_ : nullptr, counter_);
  for (const auto& [buffer, e] : outer_values_) em.forward(buffer, e);
  // Buffers computed in this kernel but neither stored nor forwarded: their body, recomputed.
  em.recompute = [this](const std::string& b) -> std::optional<ir::Value> {
    auto it = nodes_.find(b);
    if (it == nodes_.end() || it->second->store || it->second->reduce) return std::nullopt;
    return it->second->body;
  };
  em.checks = checks_;
  configure(em);
  return em;
}

void LoopEmitter::point_body(CodeWriter& w, bool vector,
                             const std::vector<const KernelNode*>& nodes) {
  BodyEmitter em = emitter(w, vector);
  point_prologue(em, vector);
  for (const KernelNode* n : nodes) {
    Emitted v = em.emit(n->body);
    if (n->reduce) {
      Accumulator(k_, *n, vector_).update(em, v, vector, acc_part_);
      continue;
    }
    em.forward(n->buffer, v);
    if (!n->store) continue;
    int64_t stride = 0;
    if (!vector || !sym::depends_on(n->store_index, lane_)) {
      em.line(store_stmt(*n, sym::to_c(n->store_index),
                         v.varying ? v.text + "[COIL_VEC - 1]" : v.text));
    } else if (sym::constant_stride(n->store_index, lane_, &stride) && stride == 1) {
      em.line(vector_store(n->dtype) + "(" + n->buffer + " + " + sym::to_c(n->store_index) + ", " +
              em.varying(v, kFloat32) + ");");
    } else {
      sym::Expr k = sym::var("k_", sym::Range{0, 15});
      sym::Expr at = sym::substitute(n->store_index, {{lane_, lane_ + k}});
      em.line("for (int k_ = 0; k_ < COIL_VEC; ++k_) " +
              store_stmt(*n, sym::to_c(at), em.varying(v, kFloat32) + "[k_]"));
    }
  }
}

void LoopEmitter::innermost(CodeWriter& w, sym::Expr var, const std::string& lo,
                            const std::string& hi, const std::vector<const KernelNode*>& nodes,
                            int parts) {
  const std::string v = sym::to_string(var);
  // GCC -O3 unrolls a loop of up to 16 constant steps completely, and then spends its time
  // in redundancy elimination over the copies: a softmax over 512-float rows (its maximum's
  // pass 8 steps of 4 vectors) compiled several times slower (docs/pipeline.md). A row
  // kernel's loops are vectorised and their accumulators split already; unrolled further they
  // gain nothing.
  auto keep_rolled = [&] {
    if (k_.is_reduction()) w.line("#pragma GCC unroll 1");
  };
  if (!vector_) {
    keep_rolled();
    auto loop = w.block(loop_head(var, lo, hi));
    point_body(w, false, nodes);
    return;
  }
  w.line("i64 " + v + " = " + lo + ";");
  if (parts > 1) {
    const std::string step = std::to_string(parts) + " * COIL_VEC";
    keep_rolled();
    auto loop =
        w.block("for (; " + v + " + " + step + " <= " + hi + "; " + v + " += " + step + ")");
    point_body(w, true, nodes);
    for (acc_part_ = 1; acc_part_ < parts; ++acc_part_) {
      const std::string at = v + "_" + std::to_string(acc_part_);
      auto part = w.block();
      w.line("const i64 " + at + " = " + v + " + " + std::to_string(acc_part_) + " * COIL_VEC;");
      w.line("const i64 " + v + " = " + at + ";");
      point_body(w, true, nodes);
    }
    acc_part_ = 0;
  }
  {
    keep_rolled();
    auto loop = w.block("for (; " + v + " + COIL_VEC <= " + hi + "; " + v + " += COIL_VEC)");
    point_body(w, true, nodes);
  }
  keep_rolled();
  auto loop = w.block("for (; " + v + " < " + hi + "; ++" + v + ")");
  point_body(w, false, nodes);
}

std::string LoopEmitter::omp_for(int collapse) const {
  std::string p = in_region_ ? "#pragma omp for schedule(static) nowait"
                             : "#pragma omp parallel for schedule(static)";
  return collapse > 1 ? p + " collapse(" + std::to_string(collapse) + ")" : p;
}

void LoopEmitter::decide_parallel(const std::vector<std::pair<sym::Expr, sym::Expr>>& tests) {
  if (serial_) {
    parallel_ = false;
    return;
  }
  std::string open;
  for (const auto& [lhs, rhs] : tests) {
    const sym::Range r = (lhs - rhs)->range();
    if (r.hi < 0) {
      parallel_ = false;
      return;
    }
    if (r.lo < 0) open += (open.empty() ? "" : " && ") + sym::to_c(lhs) + " >= " + sym::to_c(rhs);
  }
  parallel_ = true;
  if (!in_region_) parallel_condition_ = open;
}

bool vectorizable(const Kernel& k, sym::Expr lane) {
  for (const KernelNode& n : k.nodes) {
    bool in_loop = n.inner || !k.is_reduction();
    if (!in_loop) continue;
    if (!vectorizable(n.body, lane)) return false;
    if (n.reduce) {
      if (*n.reduce == ReduceKind::ArgMax || *n.reduce == ReduceKind::ArgMin) return false;
      DType t = n.body->dtype();
      bool logical = *n.reduce == ReduceKind::Any || *n.reduce == ReduceKind::All;
      if (logical ? t != kBool : t != kFloat32) return false;
    } else if (n.store && !vector_lane_type(n.dtype)) {
      return false;
    }
  }
  return true;
}

std::vector<CodeWriter::Scope> LoopEmitter::outer_loops(CodeWriter& w, size_t depth) {
  std::vector<CodeWriter::Scope> loops;
  loops.reserve(depth);
  for (size_t d = 0; d < depth; ++d)
    loops.push_back(w.block(loop_head(k_.outer_vars[d], "0", sym::to_c(k_.outer[d]))));
  return loops;
}

}  // namespace coil::cpu
