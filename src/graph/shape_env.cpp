#include "graph/shape_env.h"

#include <coil/error.h>

namespace coil {

SymLayout SymLayout::of(const TensorMeta& m) {
  return SymLayout{sym_constants(m.sizes), sym_constants(m.strides), sym::constant(m.offset)};
}

SymLayout SymLayout::contiguous(SymShape sizes) {
  SymShape strides = sym_contiguous_strides(sizes);
  return SymLayout{std::move(sizes), std::move(strides), sym::constant(0)};
}

bool SymLayout::is_static() const {
  return coil::is_static(sizes) && coil::is_static(strides) && offset->is_const();
}

namespace {
bool compare(SymGuard::Kind kind, int64_t a, int64_t b) {
  switch (kind) {
    case SymGuard::Kind::Eq:
      return a == b;
    case SymGuard::Kind::Ne:
      return a != b;
    case SymGuard::Kind::Lt:
      return a < b;
    case SymGuard::Kind::Le:
      return a <= b;
  }
  return false;
}
}  // namespace

bool SymGuard::holds(const std::unordered_map<sym::Expr, int64_t>& values) const {
  return compare(kind, sym::evaluate(lhs, values), sym::evaluate(rhs, values));
}

bool SymGuard::holds_at(const int64_t* sizes) const {
  return compare(kind, evaluate_sizes(lhs, sizes), evaluate_sizes(rhs, sizes));
}

std::string SymGuard::str() const {
  static const char* ops[] = {" == ", " != ", " < ", " <= "};
  return sym::to_string(lhs) + ops[static_cast<int>(kind)] + sym::to_string(rhs) +
         (reason.empty() ? "" : "  (" + reason + ")");
}

sym::Expr ShapeEnv::create_symbol(int64_t hint, const std::string& source) {
  COIL_ASSERT(hint >= 2, "a size symbol for ", source, " with value ", hint,
              ": sizes 0 and 1 are specialised");
  sym::Expr v = sym::size_var("s" + std::to_string(symbols_.size()));
  symbols_.push_back({v, hint, source});
  hints_[v] = hint;
  event("created " + sym::to_string(v) + " = " + std::to_string(hint) + " for " + source);
  return v;
}

int64_t ShapeEnv::hint(sym::Expr e) const { return sym::evaluate(e, hints_); }

Shape ShapeEnv::hints(const SymShape& s) const {
  Shape out;
  for (sym::Expr e : s) out.push_back(hint(e));
  return out;
}

sym::Expr ShapeEnv::simplify(sym::Expr e) const {
  if (replacements_.empty() || e->is_const()) return e;
  sym::Bindings b(replacements_.begin(), replacements_.end());
  return sym::substitute(e, b);
}

SymShape ShapeEnv::simplify(const SymShape& s) const {
  SymShape out;
  for (sym::Expr e : s) out.push_back(simplify(e));
  return out;
}

void ShapeEnv::event(const std::string& text) const {
  if (on_event) on_event(text);
}

bool ShapeEnv::restore_guard(const SymGuard& g) {
  if (!g.holds(hints_)) return false;
  for (const SymGuard& have : guards_)
    if (have.kind == g.kind && have.lhs == g.lhs && have.rhs == g.rhs) return true;
  guards_.push_back(g);
  event("guard " + g.str() + " (from the compiled-graph cache)");
  return true;
}

void ShapeEnv::add_guard(SymGuard::Kind kind, sym::Expr a, sym::Expr b, const std::string& reason) {
  SymGuard g{kind, a, b, reason};
  COIL_ASSERT(g.holds(hints_), "a guard that the hints break: ", g.str());
  guards_.push_back(g);
  event("guard " + g.str());
}

// Keeps replacements in terms of symbols that are not replaced themselves.
void ShapeEnv::replace(sym::Expr var, sym::Expr by, const std::string& reason) {
  add_guard(SymGuard::Kind::Eq, var, by, reason);
  for (auto& [v, e] : replacements_) e = sym::substitute(e, {{var, by}});
  replacements_[var] = by;
  if (by->is_const()) event("specialised " + sym::to_string(var) + " = " + sym::to_string(by));
}

namespace {
// Which of two symbols to keep when they are found equal: the one created first.
bool created_before(sym::Expr a, sym::Expr b) {
  return a->name().size() != b->name().size() ? a->name().size() < b->name().size()
                                              : a->name() < b->name();
}
}  // namespace

bool ShapeEnv::eq(sym::Expr a, sym::Expr b, const std::string& reason) {
  a = simplify(a);
  b = simplify(b);
  if (a == b) return true;
  sym::Expr diff = a - b;
  if (diff->is_const()) return false;
  if (diff->range().lo > 0 || diff->range().hi < 0) return false;
  if (hint(a) != hint(b)) {
    add_guard(SymGuard::Kind::Ne, a, b, reason);
    return false;
  }
  bool a_var = a->kind() == sym::Kind::Var, b_var = b->kind() == sym::Kind::Var;
  if (a_var && b_var)
    created_before(a, b) ? replace(b, a, reason) : replace(a, b, reason);
  else if (a_var && !sym::depends_on(b, a))
    replace(a, b, reason);
  else if (b_var && !sym::depends_on(a, b))
    replace(b, a, reason);
  else
    add_guard(SymGuard::Kind::Eq, a, b, reason);
  return true;
}

bool ShapeEnv::lt(sym::Expr a, sym::Expr b, const std::string& reason) {
  a = simplify(a);
  b = simplify(b);
  sym::Expr diff = b - a;
  if (diff->range().lo > 0) return true;
  if (diff->range().hi <= 0) return false;
  if (hint(a) < hint(b)) {
    add_guard(SymGuard::Kind::Lt, a, b, reason);
    return true;
  }
  add_guard(SymGuard::Kind::Le, b, a, reason);
  return false;
}

bool ShapeEnv::le(sym::Expr a, sym::Expr b, const std::string& reason) {
  a = simplify(a);
  b = simplify(b);
  sym::Expr diff = b - a;
  if (diff->range().lo >= 0) return true;
  if (diff->range().hi < 0) return false;
  if (hint(a) <= hint(b)) {
    add_guard(SymGuard::Kind::Le, a, b, reason);
    return true;
  }
  add_guard(SymGuard::Kind::Lt, b, a, reason);
  return false;
}

int64_t ShapeEnv::guard_int(sym::Expr e, const std::string& reason) {
  e = simplify(e);
  int64_t v = hint(e);
  if (e->is_const()) return v;
  if (e->kind() == sym::Kind::Var)
    replace(e, sym::constant(v), reason);
  else
    add_guard(SymGuard::Kind::Eq, e, sym::constant(v), reason);
  return v;
}

}  // namespace coil
