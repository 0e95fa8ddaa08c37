#include "graph/sym_node.h"

#include <coil/error.h>

namespace coil {

namespace {

// The env of the symbolic operands (the same one: a capture has one), or null.
std::shared_ptr<ShapeEnv> env_of(const SymInt& a, const SymInt& b) {
  const auto& na = a.node();
  const auto& nb = b.node();
  COIL_ASSERT(!na || !nb || na->env == nb->env, "SymInts of two different captures are mixed");
  return na ? na->env : nb ? nb->env : nullptr;
}

sym::Expr expr_of(const SymInt& s) {
  return s.is_symbolic() ? s.node()->expr : sym::constant(s.hint());
}

template <typename Plain, typename Symbolic>
SymInt arith(const SymInt& a, const SymInt& b, Plain plain, Symbolic symbolic) {
  const int64_t hint = plain(a.hint(), b.hint());
  std::shared_ptr<ShapeEnv> env = env_of(a, b);
  if (!env) return SymInt(hint);
  return make_symint(symbolic(expr_of(a), expr_of(b)), env);
}

int64_t floor_div(int64_t a, int64_t b) {
  COIL_CHECK(b != 0, "SymInt: division by zero");
  const int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

std::string relation(const char* op, const SymInt& a, const SymInt& b) {
  return "a comparison " + a.str() + " " + op + " " + b.str() + " in the program";
}

}  // namespace

SymInt make_symint(sym::Expr e, const std::shared_ptr<ShapeEnv>& env) {
  if (e->is_const()) return SymInt(e->value());
  return SymInt(env->hint(e), std::make_shared<const detail::SymNode>(detail::SymNode{e, env}));
}

Arg symints_arg(const SymInts& sizes) {
  SymIntsArg out;
  bool symbolic = false;
  for (const SymInt& s : sizes) {
    out.hints.push_back(s.hint());
    out.exprs.push_back(expr_of(s));
    symbolic |= s.is_symbolic();
  }
  if (!symbolic) return out.hints;
  return out;
}

Arg symint_arg(const SymInt& size) {
  if (!size.is_symbolic()) return size.hint();
  return SymIntArg{size.hint(), size.node()->expr};
}

bool same_symint(const SymInt& a, const SymInt& b) { return expr_of(a) == expr_of(b); }

NodeArg shape_arg(const Graph& g, const SymShape& s) {
  if (is_static(s)) return const_values(s);
  return SymIntsArg{g.shape_env()->hints(s), s};
}

NodeArg size_arg(const Graph& g, sym::Expr n) {
  if (n->is_const()) return n->value();
  return SymIntArg{g.shape_env()->hint(n), n};
}

int64_t SymInt::guard_int() const {
  if (node_) node_->env->guard_int(node_->expr, str() + " used as a plain number by the program");
  return hint_;
}

std::string SymInt::str() const {
  return node_ ? sym::to_string(node_->expr) : std::to_string(hint_);
}

SymInt operator+(const SymInt& a, const SymInt& b) {
  return arith(
      a, b, [](int64_t x, int64_t y) { return x + y; }, sym::add);
}
SymInt operator-(const SymInt& a, const SymInt& b) {
  return arith(
      a, b, [](int64_t x, int64_t y) { return x - y; }, sym::sub);
}
SymInt operator*(const SymInt& a, const SymInt& b) {
  return arith(
      a, b, [](int64_t x, int64_t y) { return x * y; }, sym::mul);
}
SymInt operator/(const SymInt& a, const SymInt& b) {
  // A symbolic divisor must be a size (positive): a plain one is checked by floor_div.
  return arith(a, b, floor_div, [](sym::Expr x, sym::Expr y) { return sym::floordiv(x, y); });
}
SymInt operator%(const SymInt& a, const SymInt& b) {
  return arith(
      a, b, [](int64_t x, int64_t y) { return x - floor_div(x, y) * y; },
      [](sym::Expr x, sym::Expr y) { return sym::mod(x, y); });
}

bool operator==(const SymInt& a, const SymInt& b) {
  std::shared_ptr<ShapeEnv> env = env_of(a, b);
  if (!env) return a.hint() == b.hint();
  return env->eq(expr_of(a), expr_of(b), relation("==", a, b));
}
bool operator<(const SymInt& a, const SymInt& b) {
  std::shared_ptr<ShapeEnv> env = env_of(a, b);
  if (!env) return a.hint() < b.hint();
  return env->lt(expr_of(a), expr_of(b), relation("<", a, b));
}
bool operator<=(const SymInt& a, const SymInt& b) {
  std::shared_ptr<ShapeEnv> env = env_of(a, b);
  if (!env) return a.hint() <= b.hint();
  return env->le(expr_of(a), expr_of(b), relation("<=", a, b));
}

std::vector<int64_t> hints_of(const SymInts& sizes) {
  std::vector<int64_t> out;
  for (const SymInt& s : sizes) out.push_back(s.hint());
  return out;
}

}  // namespace coil
