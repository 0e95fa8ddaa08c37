// Printing: readable text (Python's operators) and C. Both print a sum as its terms with
// signs folded in ("x - 8*y + 3"), a product as coefficient*factors ("8*x", "-x*y"), and
// parenthesise an operand of *, // and % unless it is a leaf or a call.
#include <functional>
#include <string>

#include "sym/int_math.h"
#include "sym/intern.h"

namespace coil::sym {
namespace {

class Printer {
 public:
  explicit Printer(bool c, const Divider* divider = nullptr) : c_(c), divider_(divider) {}

  std::string print(Expr e) {
    const std::vector<Expr>& a = e->args();
    switch (e->kind()) {
      case Kind::Const:
        return literal(e->value());
      case Kind::Var:
        return e->name();
      case Kind::Add:
        return sum(a);
      case Kind::Mul:
        return product(a);
      case Kind::FloorDiv:
      case Kind::Mod:
        return div_mod(e);
      case Kind::Min:
      case Kind::Max:
        return min_max(e);
    }
    throw InternalError("sym: printing an unknown kind");
  }

 private:
  // C: int32 literals as they are, wider ones with LL (the int64 minimum has no literal).
  std::string literal(int64_t v) {
    if (!c_ || (v >= INT32_MIN && v <= INT32_MAX)) return std::to_string(v);
    if (v == detail::kMin) return "(-9223372036854775807LL - 1)";
    return std::to_string(v) + "LL";
  }

  // The leading constant of a term, or 1.
  static int64_t coefficient(Expr t) {
    if (t->is_const()) return t->value();
    return t->kind() == Kind::Mul && t->args()[0]->is_const() ? t->args()[0]->value() : 1;
  }

  std::string sum(const std::vector<Expr>& terms) {
    std::string s = print(terms[0]);
    for (size_t i = 1; i < terms.size(); ++i) {
      int64_t c = coefficient(terms[i]);
      if (c >= 0 || c == detail::kMin) {
        s += " + " + print(terms[i]);
      } else if (terms[i]->is_const()) {
        s += " - " + literal(-c);
      } else {
        std::vector<Expr> negated = terms[i]->args();
        negated[0] = constant(-c);
        s += " - " + product(negated);
      }
    }
    return s;
  }

  std::string product(const std::vector<Expr>& factors) {
    std::string s;
    size_t i = 0;
    if (factors[0]->is_const()) {
      int64_t c = factors[0]->value();
      s = c == -1 ? "-" : c == 1 ? "" : literal(c) + "*";
      i = 1;
    }
    for (size_t first = i; i < factors.size(); ++i)
      s += (i > first ? "*" : "") + operand(factors[i]);
    return s;
  }

  // Python and C agree on `/` and `%` when the numerator is non-negative.
  std::string div_mod(Expr e) {
    bool is_div = e->kind() == Kind::FloorDiv;
    Expr n = e->args()[0];
    Expr d = e->args()[1];
    if (!c_) return operand(n) + (is_div ? " // " : " % ") + operand(d);
    if (n->range().lo >= 0 && divider_)
      if (std::string t = (*divider_)(is_div, n, print(n), d); !t.empty()) return t;
    if (n->range().lo >= 0) return operand(n) + (is_div ? " / " : " % ") + operand(d);
    return (is_div ? "coil_floordiv(" : "coil_mod(") + print(n) + ", " + print(d) + ")";
  }

  // C has no min/max for integers without a header: a conditional, parenthesised.
  std::string min_max(Expr e) {
    bool is_min = e->kind() == Kind::Min;
    std::string a = print(e->args()[0]), b = print(e->args()[1]);
    if (!c_) return (is_min ? "min(" : "max(") + a + ", " + b + ")";
    return "(" + a + (is_min ? " < " : " > ") + b + " ? " + a + " : " + b + ")";
  }

  std::string operand(Expr e) {
    bool leaf = e->kind() == Kind::Var || e->kind() == Kind::Min || e->kind() == Kind::Max ||
                (e->is_const() && e->value() >= 0);
    return leaf ? print(e) : "(" + print(e) + ")";
  }

  bool c_;
  const Divider* divider_;
};

}  // namespace

std::string to_string(Expr e) { return Printer(false).print(e); }
std::string to_c(Expr e) { return Printer(true).print(e); }
std::string to_c(Expr e, const Divider& divider) { return Printer(true, &divider).print(e); }

}  // namespace coil::sym
