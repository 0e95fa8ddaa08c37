// Reading expressions: substitution, evaluation, variables, strides and divisibility.
#include <algorithm>
#include <functional>
#include <unordered_set>

#include "sym/int_math.h"
#include "sym/intern.h"

namespace coil::sym {
namespace {

// Calls f on every distinct node of e once (expressions are DAGs: subterms are shared).
void visit(Expr e, const std::function<void(Expr)>& f) {
  std::unordered_set<Expr> seen;
  std::vector<Expr> stack{e};
  while (!stack.empty()) {
    Expr n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    f(n);
    for (Expr a : n->args()) stack.push_back(a);
  }
}

// The node `e` with its operands replaced, simplified by the constructors.
Expr rebuild(Expr e, const std::vector<Expr>& args) {
  switch (e->kind()) {
    case Kind::Add:
    case Kind::Mul: {
      Expr r = args[0];
      for (size_t i = 1; i < args.size(); ++i)
        r = e->kind() == Kind::Add ? add(r, args[i]) : mul(r, args[i]);
      return r;
    }
    case Kind::FloorDiv:
    case Kind::Mod: {
      // The divisor was positive for every value of its variables, and substitution keeps each
      // variable's value in its range, so it still is, even where interval arithmetic can no
      // longer show it ((w + 3)*(w + 3) for w in [-2, 1]): max(d, 1) says so at no cost.
      Expr d = args[1];
      if (!d->is_const() && d->range().lo < 1) d = max(d, constant(1));
      return e->kind() == Kind::FloorDiv ? floordiv(args[0], d) : mod(args[0], d);
    }
    case Kind::Min:
      return min(args[0], args[1]);
    case Kind::Max:
      return max(args[0], args[1]);
    case Kind::Const:
    case Kind::Var:
      break;
  }
  return e;
}

Expr substitute_memo(Expr e, const Bindings& bindings, std::unordered_map<Expr, Expr>& memo) {
  if (e->kind() == Kind::Var) {
    auto it = bindings.find(e);
    return it == bindings.end() ? e : it->second;
  }
  auto done = memo.find(e);
  if (done != memo.end()) return done->second;
  std::vector<Expr> args;
  bool changed = false;
  for (Expr a : e->args()) {
    args.push_back(substitute_memo(a, bindings, memo));
    changed |= args.back() != a;
  }
  Expr r = changed ? rebuild(e, args) : e;  // a canonical node with the same operands stays
  memo.emplace(e, r);
  return r;
}

}  // namespace

Expr substitute(Expr e, const Bindings& bindings) {
  for (const auto& [v, value] : bindings)
    COIL_ASSERT(v->kind() == Kind::Var, "substitute binds ", to_string(v), ", not a variable");
  std::unordered_map<Expr, Expr> memo;
  return substitute_memo(e, bindings, memo);
}

int64_t evaluate(Expr e, const std::unordered_map<Expr, int64_t>& values) {
  using namespace detail;
  const std::vector<Expr>& a = e->args();
  switch (e->kind()) {
    case Kind::Const:
      return e->value();
    case Kind::Var: {
      auto it = values.find(e);
      COIL_ASSERT(it != values.end(), "evaluate: variable ", e->name(), " has no value");
      return it->second;
    }
    case Kind::Add:
    case Kind::Mul: {
      int64_t r = evaluate(a[0], values);
      for (size_t i = 1; i < a.size(); ++i) {
        int64_t x = evaluate(a[i], values);
        r = e->kind() == Kind::Add ? checked_add(r, x) : checked_mul(r, x);
      }
      return r;
    }
    case Kind::FloorDiv:
    case Kind::Mod: {
      int64_t d = evaluate(a[1], values);
      COIL_ASSERT(d > 0, "evaluate: ", to_string(e), " divides by ", d);
      int64_t n = evaluate(a[0], values);
      return e->kind() == Kind::FloorDiv ? floor_div(n, d) : floor_mod(n, d);
    }
    case Kind::Min:
      return std::min(evaluate(a[0], values), evaluate(a[1], values));
    case Kind::Max:
      return std::max(evaluate(a[0], values), evaluate(a[1], values));
  }
  throw InternalError("sym: evaluate of an unknown kind");
}

std::vector<Expr> free_vars(Expr e) {
  std::vector<Expr> vars;
  visit(e, [&](Expr n) {
    if (n->kind() == Kind::Var) vars.push_back(n);
  });
  std::sort(vars.begin(), vars.end(), less);
  return vars;
}

bool depends_on(Expr e, Expr v) {
  COIL_ASSERT(v->kind() == Kind::Var, "depends_on ", to_string(v), ", not a variable");
  bool found = false;
  visit(e, [&](Expr n) { found |= n == v; });
  return found;
}

// e(v + 1) - e(v) is built as an expression in v: it simplifies to a constant exactly when
// the simplifier can see that v is used affinely. (v + 1 takes values one past v's range, so
// the answer holds between consecutive values of v inside it.)
Expr stride(Expr e, Expr v) {
  if (!depends_on(e, v)) return constant(0);
  Expr diff = sub(substitute(e, {{v, add(v, constant(1))}}), e);
  return depends_on(diff, v) ? nullptr : diff;
}

bool constant_stride(Expr e, Expr v, int64_t* stride) {
  Expr s = sym::stride(e, v);
  if (!s || !s->is_const()) return false;
  *stride = s->value();
  return true;
}

bool same_over_aligned_runs(Expr e, Expr v, int64_t width) {
  COIL_ASSERT(v->kind() == Kind::Var && v->range().lo == 0 && width > 0,
              "same_over_aligned_runs over ", to_string(v));
  if (!depends_on(e, v)) return true;
  const Expr q = var(v->name() + "_run", {0, v->range().hi / width});
  const Expr j = var(v->name() + "_in_run", {0, width - 1});
  return !depends_on(substitute(e, {{v, add(mul(q, constant(width)), j)}}), j);
}

int64_t divisor_of(Expr e) {
  using detail::gcd_with;
  const std::vector<Expr>& a = e->args();
  switch (e->kind()) {
    case Kind::Const:
      COIL_ASSERT(e->value() != detail::kMin, "divisor_of the most negative int64");
      return e->value() < 0 ? -e->value() : e->value();
    case Kind::Var:
    case Kind::FloorDiv:
      return 1;
    case Kind::Mul: {
      // A factor of a divisor divides too, so stop multiplying before it would overflow.
      int64_t r = 1;
      for (Expr f : a) {
        int64_t p;
        if (!__builtin_mul_overflow(r, divisor_of(f), &p)) r = p;
      }
      return r;
    }
    case Kind::Add:
    case Kind::Min:
    case Kind::Max: {
      int64_t g = 0;
      for (Expr x : a) g = gcd_with(g, divisor_of(x));
      return g;
    }
    case Kind::Mod:
      return gcd_with(divisor_of(a[1]), divisor_of(a[0]));  // e % d == e - d*(e // d)
  }
  throw InternalError("sym: divisor_of an unknown kind");
}

}  // namespace coil::sym
