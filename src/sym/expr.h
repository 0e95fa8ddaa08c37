// The index algebra (Inductor's sympy, TVM's arith): integer expressions over index and size
// variables, used by lowering (views as index transforms), the scheduler (which loops can
// merge) and code generation (is an access contiguous in the innermost loop?).
//
// Expressions are immutable and hash-consed: building the same expression twice yields the
// same node, so `a == b` is structural equality and expressions can key maps. Every
// constructor simplifies as it builds (constant folding, flattening, combining like terms,
// floor-div/mod canonical forms), using the value ranges that variables carry: there is no
// unsimplified expression, and substitution re-simplifies.
//
// Canonical form: a flat sum of monomials (products distribute over sums), like terms
// combined, terms sorted by their non-constant part and the constant last; a product is a
// constant coefficient then sorted factors; floor-div/mod in TVM's ((x % a) // b) form, with
// multiples of the divisor pulled out (floordiv) or dropped (mod).
//
// Semantics: floordiv and mod are Python's (floor division; the remainder has the divisor's
// sign). Divisors are positive: constants, or expressions whose range is positive, such as a
// size variable (a tensor's dimension that is only known when the compiled code runs);
// anything else is an InternalError.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

namespace coil::sym {

// Inclusive bounds of the values an expression may take.
struct Range {
  int64_t lo;
  int64_t hi;
  bool operator==(const Range&) const = default;
};

enum class Kind : uint8_t {
  Const,     // value()
  Var,       // name(), range()
  Add,       // args(): two or more terms, at most one of them a Const (last); no Add terms
  Mul,       // args(): two or more factors, at most one of them a Const (first); no Add factors
  FloorDiv,  // args(): {numerator, divisor}: a Const >= 2 or a non-constant of positive range
  Mod,       // args(): {numerator, divisor}: as FloorDiv
  Min,       // args(): two operands, in less() order but a Const last
  Max,       // args(): two operands, in less() order but a Const last
};

class Node;

// A handle to an interned node: as cheap as a pointer and compared like one (equal handles
// are equal expressions), but a class, so that `x * 8 + y` can build expressions. Null
// (default or nullptr) means "no expression".
class Expr {
 public:
  Expr() = default;
  Expr(std::nullptr_t) {}
  explicit Expr(const Node* node) : node_(node) {}
  const Node* operator->() const { return node_; }
  const Node& operator*() const { return *node_; }
  const Node* get() const { return node_; }
  explicit operator bool() const { return node_ != nullptr; }
  bool operator==(const Expr&) const = default;

 private:
  const Node* node_ = nullptr;
};

class Node {
 public:
  Kind kind() const { return kind_; }
  int64_t value() const { return value_; }           // Const
  const std::string& name() const { return name_; }  // Var
  const std::vector<Expr>& args() const { return args_; }
  Range range() const { return range_; }  // of every expression, from its variables' ranges
  // A loop index over a size known only at run time: every value is below bound() (null for
  // other nodes). floordiv and mod by that size use it (j // n == 0 and j % n == j).
  Expr bound() const { return bound_; }
  size_t hash() const { return hash_; }

  bool is_const() const { return kind_ == Kind::Const; }
  bool is_const(int64_t v) const { return kind_ == Kind::Const && value_ == v; }

 private:
  friend struct Interner;
  Node() = default;
  Kind kind_{};
  int64_t value_ = 0;
  std::string name_;
  std::vector<Expr> args_;
  Range range_{0, 0};
  Expr bound_;
  size_t hash_ = 0;
};

}  // namespace coil::sym

// By structure (Node::hash), not by address: a map keyed by expressions and filled in the
// same order iterates in the same order in every process.
template <>
struct std::hash<coil::sym::Expr> {
  size_t operator()(coil::sym::Expr e) const { return e ? e->hash() : 0; }
};

namespace coil::sym {

// ---- building (each result is simplified and interned; thread-safe) -----------------------
Expr constant(int64_t v);
// A variable with inclusive value bounds; the same name with another range is another variable.
Expr var(const std::string& name, Range range);
// An index variable of a loop over `size` iterations: values 0 .. size-1 (a loop of no
// iterations never runs its body; its variable gets the range [0, 0]).
Expr index_var(const std::string& name, int64_t size);
// The largest size a size variable stands for: more elements than any memory holds, and small
// enough that products of a few sizes keep meaningful ranges.
constexpr int64_t kMaxSize = int64_t{1} << 48;
// A size known only at run time (a dynamic dimension): values 2 .. kMaxSize. Sizes 0 and 1
// are never symbolic (they change what broadcasting means, so a graph specialises on them).
Expr size_var(const std::string& name);
// An index variable of a loop over `size` iterations, a size expression: values 0 .. size-1,
// with `size` as its bound() (a constant size gives index_var's variable).
Expr index_var(const std::string& name, Expr size);

Expr add(Expr a, Expr b);
Expr sub(Expr a, Expr b);
Expr mul(Expr a, Expr b);
Expr neg(Expr a);
Expr floordiv(Expr a, int64_t divisor);
Expr mod(Expr a, int64_t divisor);
Expr floordiv(Expr a, Expr divisor);
Expr mod(Expr a, Expr divisor);
Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);

inline Expr operator+(Expr a, Expr b) { return add(a, b); }
inline Expr operator+(Expr a, int64_t b) { return add(a, constant(b)); }
inline Expr operator-(Expr a, Expr b) { return sub(a, b); }
inline Expr operator-(Expr a, int64_t b) { return sub(a, constant(b)); }
inline Expr operator*(Expr a, Expr b) { return mul(a, b); }
inline Expr operator*(Expr a, int64_t b) { return mul(a, constant(b)); }
inline Expr operator+(int64_t a, Expr b) { return add(constant(a), b); }
inline Expr operator-(int64_t a, Expr b) { return sub(constant(a), b); }
inline Expr operator*(int64_t a, Expr b) { return mul(constant(a), b); }
inline Expr operator-(Expr a) { return neg(a); }

// ---- reading --------------------------------------------------------------------------------
using Bindings = std::unordered_map<Expr, Expr>;
// Replaces variables (keys must be Vars) and simplifies the result.
Expr substitute(Expr e, const Bindings& bindings);
// The value for integer values of the variables (every variable of `e` must be bound).
int64_t evaluate(Expr e, const std::unordered_map<Expr, int64_t>& values);
// The variables `e` mentions, in a deterministic order (by name, then range).
std::vector<Expr> free_vars(Expr e);
bool depends_on(Expr e, Expr var);
// True with *stride = e(v + 1) - e(v) when that difference simplifies to a constant, for
// consecutive values of v inside its range (an affine use of v; 0 when e does not use v).
// False, leaving `stride` untouched, when v is used otherwise (inside a floordiv or mod that
// does not vanish, in a product with another variable, under min/max).
bool constant_stride(Expr e, Expr v, int64_t* stride);
// The same difference when it does not depend on v, a constant or an expression of other
// variables (a stride over size symbols: s1*64); null when v is used otherwise.
Expr stride(Expr e, Expr v);
// Whether consecutive values of v give consecutive values of e (a stride of exactly 1).
inline bool steps_by_one(Expr e, Expr v) {
  int64_t s = 0;
  return constant_stride(e, v, &s) && s == 1;
}
// Whether e takes one value over each run of `width` consecutive values of v that starts at a
// multiple of width (and lies in v's range, which must start at 0): a vectorised thread's
// elements reading a channel's parameter, (i % 200704) // 3136 for width 4. With v = width*q +
// j, j in [0, width), the simplifier's floor-div/mod forms leave j out; false when they cannot
// show it (a run-time divisor).
bool same_over_aligned_runs(Expr e, Expr v, int64_t width);
// Whether the divisor of a FloorDiv or Mod node is a constant (else a size expression).
inline bool has_const_divisor(Expr e) { return e->args()[1]->is_const(); }
// A positive constant that divides every value of `e`, the largest the structure shows
// (the gcd of a sum's terms, the product of a product's): divisor_of(8*x + 4*y) == 4. 0 for the
// constant 0.
int64_t divisor_of(Expr e);

// A total, deterministic order by structure (kind, constants, variable names and ranges, then
// operands), never by address, so generated code is the same in every process.
bool less(Expr a, Expr b);

// Readable text with Python's operators: "x0 + 8*x1 - 1", "(x0 % 32) // 8", "min(x0, 3)".
std::string to_string(Expr e);
// to_string's text read back; `var_of` gives the variable of each name (null: unknown, a
// coil::Error naming the column).
Expr parse(const std::string& text, const std::function<Expr(const std::string&)>& var_of);
// A C expression over int64_t variables named as the Vars are. floordiv/mod print as `/` and
// `%` when the numerator's range is non-negative, else as calls to coil_floordiv(a, b) /
// coil_mod(a, b), which the generated code defines. min/max print as parenthesised
// conditionals; constants beyond int32 carry an LL suffix.
std::string to_c(Expr e);
// The same, but a non-negative numerator over a divisor prints as the text `divider` gives for
// it (floordiv when `is_div`, else mod; the numerator as an Expr and as C), or as to_c prints it
// where that text is empty: code that precomputes a division's constants once (a GPU kernel's
// run-time sizes) instead of dividing, or divides in 32 bits where the operands fit.
using Divider = std::function<std::string(bool is_div, Expr numerator,
                                          const std::string& numerator_c, Expr divisor)>;
std::string to_c(Expr e, const Divider& divider);

}  // namespace coil::sym
