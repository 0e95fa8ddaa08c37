// Random index expressions for the brute-force tests: a plain tree type evaluated by the
// test's own arithmetic (the reference), a seeded generator of trees shaped like index
// arithmetic, and enumeration of every assignment of the variables over their ranges.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>

#include "sym/expr.h"

namespace coil::sym::testing {

// Python's floor division and modulo, written independently of the library's.
inline int64_t py_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}
inline int64_t py_mod(int64_t a, int64_t b) { return a - b * py_div(a, b); }

enum class Op { Const, Var, Add, Sub, Mul, Div, Mod, Min, Max };

// The reference: an unsimplified tree.
struct Tree {
  Op op;
  int64_t value = 0;           // Const value, Var index, Div/Mod constant divisor
  std::shared_ptr<Tree> a, b;  // Div/Mod: b, when set, is a symbolic divisor (a size)
};
using TreeP = std::shared_ptr<Tree>;

inline TreeP leaf(Op op, int64_t v) {
  return std::make_shared<Tree>(Tree{op, v, nullptr, nullptr});
}
inline TreeP node(Op op, TreeP a, TreeP b, int64_t v = 0) {
  return std::make_shared<Tree>(Tree{op, v, std::move(a), std::move(b)});
}

// Small ranges, some with negative lower bounds; all of them enumerate in 8*8*12*4*5 points.
// The last variable, "s", is positive: it stands for a size, a divisor known only at run time.
inline constexpr Range kRanges[] = {{0, 7}, {-3, 4}, {0, 11}, {-2, 1}, {1, 5}};
inline constexpr const char* kNames[] = {"x", "y", "z", "w", "s"};
inline constexpr int kNumVars = 5;
inline constexpr int kSizeVar = 4;

inline Expr sym_var(int i) {
  static const Expr vars[] = {var(kNames[0], kRanges[0]), var(kNames[1], kRanges[1]),
                              var(kNames[2], kRanges[2]), var(kNames[3], kRanges[3]),
                              var(kNames[4], kRanges[4])};
  return vars[i];
}

inline int64_t eval(const Tree& t, const int64_t* env) {
  switch (t.op) {
    case Op::Const:
      return t.value;
    case Op::Var:
      return env[t.value];
    case Op::Add:
      return eval(*t.a, env) + eval(*t.b, env);
    case Op::Sub:
      return eval(*t.a, env) - eval(*t.b, env);
    case Op::Mul:
      return eval(*t.a, env) * eval(*t.b, env);
    case Op::Div:
      return py_div(eval(*t.a, env), t.b ? eval(*t.b, env) : t.value);
    case Op::Mod:
      return py_mod(eval(*t.a, env), t.b ? eval(*t.b, env) : t.value);
    case Op::Min:
      return std::min(eval(*t.a, env), eval(*t.b, env));
    case Op::Max:
      return std::max(eval(*t.a, env), eval(*t.b, env));
  }
  return 0;
}

inline Expr build(const Tree& t) {
  switch (t.op) {
    case Op::Const:
      return constant(t.value);
    case Op::Var:
      return sym_var(static_cast<int>(t.value));
    case Op::Add:
      return build(*t.a) + build(*t.b);
    case Op::Sub:
      return build(*t.a) - build(*t.b);
    case Op::Mul:
      return build(*t.a) * build(*t.b);
    case Op::Div:
      return t.b ? floordiv(build(*t.a), build(*t.b)) : floordiv(build(*t.a), t.value);
    case Op::Mod:
      return t.b ? mod(build(*t.a), build(*t.b)) : mod(build(*t.a), t.value);
    case Op::Min:
      return min(build(*t.a), build(*t.b));
    case Op::Max:
      return max(build(*t.a), build(*t.b));
  }
  return nullptr;
}

inline std::string show(const Tree& t) {
  auto bin = [&](const char* o) { return "(" + show(*t.a) + o + show(*t.b) + ")"; };
  switch (t.op) {
    case Op::Const:
      return std::to_string(t.value);
    case Op::Var:
      return kNames[t.value];
    case Op::Add:
      return bin(" + ");
    case Op::Sub:
      return bin(" - ");
    case Op::Mul:
      return bin("*");
    case Op::Div:
      return "(" + show(*t.a) + " // " + (t.b ? show(*t.b) : std::to_string(t.value)) + ")";
    case Op::Mod:
      return "(" + show(*t.a) + " % " + (t.b ? show(*t.b) : std::to_string(t.value)) + ")";
    case Op::Min:
      return "min(" + show(*t.a) + ", " + show(*t.b) + ")";
    case Op::Max:
      return "max(" + show(*t.a) + ", " + show(*t.b) + ")";
  }
  return "?";
}

inline TreeP substitute_tree(const TreeP& t, int v, const TreeP& by) {
  if (t->op == Op::Var) return t->value == v ? by : t;
  if (!t->a) return t;
  return node(t->op, substitute_tree(t->a, v, by), t->b ? substitute_tree(t->b, v, by) : nullptr,
              t->value);
}

inline void mark_vars(const Tree& t, bool* used) {
  if (t.op == Op::Var) used[t.value] = true;
  if (t.a) mark_vars(*t.a, used);
  if (t.b) mark_vars(*t.b, used);
}

// Random trees of at most the given depth, shaped like index arithmetic: products have a leaf
// operand (so values stay small), constants are often multiples of the divisors, and some
// subtrees are written as a split c*d*(t // d) + c*(t % d) for the recombination rule to find.
// A fifth of the divisions divide by a size (s, k*s, s*s or s + 1), as dynamic shapes do.
class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  TreeP tree(int depth) {
    if (depth == 0 || pick(4) == 0) return leaf_tree();
    switch (pick(12)) {
      case 0:
      case 1:
        return node(Op::Add, tree(depth - 1), tree(depth - 1));
      case 2:
        return node(Op::Sub, tree(depth - 1), tree(depth - 1));
      case 3:
      case 4:
        return node(Op::Mul, tree(depth - 1), leaf_tree());
      case 5:
      case 6:
        return division(Op::Div, tree(depth - 1));
      case 7:
      case 8:
        return division(Op::Mod, tree(depth - 1));
      case 9:
        return node(Op::Min, tree(depth - 1), tree(depth - 1));
      case 10:
        return node(Op::Max, tree(depth - 1), tree(depth - 1));
      default: {
        TreeP t = tree(depth - 1);
        int64_t c = 1 + pick(3);
        if (pick(4) == 0) {
          TreeP d = size_divisor();
          return node(Op::Add,
                      node(Op::Mul, node(Op::Mul, node(Op::Div, t, d), d), leaf(Op::Const, c)),
                      node(Op::Mul, node(Op::Mod, t, d), leaf(Op::Const, c)));
        }
        int64_t d = 1 + pick(9);
        return node(Op::Add, node(Op::Mul, node(Op::Div, t, nullptr, d), leaf(Op::Const, c * d)),
                    node(Op::Mul, node(Op::Mod, t, nullptr, d), leaf(Op::Const, c)));
      }
    }
  }

  // t // d or t % d by a constant, or, one time in five, by a size.
  TreeP division(Op op, TreeP t) {
    if (pick(5) == 0) return node(op, std::move(t), size_divisor());
    return node(op, std::move(t), nullptr, 1 + pick(9));
  }

  // A positive divisor built from the size variable.
  TreeP size_divisor() {
    TreeP s = leaf(Op::Var, kSizeVar);
    switch (pick(4)) {
      case 0:
        return node(Op::Mul, s, leaf(Op::Const, 2 + pick(2)));
      case 1:
        return node(Op::Mul, s, s);
      case 2:
        return node(Op::Add, s, leaf(Op::Const, 1));
      default:
        return s;
    }
  }

  TreeP leaf_tree() {
    if (pick(4) != 0) return leaf(Op::Var, pick(kNumVars));
    static const int64_t kConstants[] = {-4, -3, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 24};
    return leaf(Op::Const, kConstants[pick(16)]);
  }

  int64_t pick(int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(rng_); }

 private:
  std::mt19937_64 rng_;
};

// Calls f(env) for every assignment of the variables marked in `used` (the others stay at
// their lower bounds).
inline void for_each_point(const bool* used, const std::function<void(const int64_t*)>& f) {
  int64_t env[kNumVars];
  for (int i = 0; i < kNumVars; ++i) env[i] = kRanges[i].lo;
  while (true) {
    f(env);
    int i = 0;
    while (i < kNumVars && (!used[i] || env[i] == kRanges[i].hi)) {
      env[i] = kRanges[i].lo;
      ++i;
    }
    if (i == kNumVars) return;
    ++env[i];
  }
}

// The assignment `env` as evaluate() takes it.
inline std::unordered_map<Expr, int64_t> bindings_of(const int64_t* env) {
  std::unordered_map<Expr, int64_t> m;
  for (int i = 0; i < kNumVars; ++i) m[sym_var(i)] = env[i];
  return m;
}

inline std::string point_str(const int64_t* env) {
  std::string s;
  for (int i = 0; i < kNumVars; ++i)
    s += std::string(kNames[i]) + "=" + std::to_string(env[i]) + " ";
  return s;
}

}  // namespace coil::sym::testing
