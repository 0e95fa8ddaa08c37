// Brute-force checks of the simplifier: random expression trees are built twice, as a plain
// tree evaluated here (the reference) and through the simplifying constructors; at every
// assignment of the variables over their ranges the two must agree and every node of the
// simplified expression must lie in its range(). The same trees drive checks of
// constant_stride, substitute and of the canonical form being a fixpoint.
//
// COIL_SYM_FUZZ_ROUNDS=N multiplies the volume (each round uses fresh seeds) for long runs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "sym/random_expr.h"

using namespace coil::sym;
using namespace coil::sym::testing;

namespace {

// Evaluates `e` node by node with the test's own arithmetic, recording the first node whose
// value falls outside its range().
int64_t eval_checking_ranges(Expr e, const int64_t* env, std::string* error) {
  std::vector<int64_t> v;
  for (Expr a : e->args()) v.push_back(eval_checking_ranges(a, env, error));
  int64_t r = 0;
  switch (e->kind()) {
    case Kind::Const:
      r = e->value();
      break;
    case Kind::Var:
      for (int i = 0; i < kNumVars; ++i)
        if (e == sym_var(i)) r = env[i];
      break;
    case Kind::Add:
      for (int64_t x : v) r += x;
      break;
    case Kind::Mul:
      r = 1;
      for (int64_t x : v) r *= x;
      break;
    case Kind::FloorDiv:
      r = py_div(v[0], v[1]);
      break;
    case Kind::Mod:
      r = py_mod(v[0], v[1]);
      break;
    case Kind::Min:
      r = std::min(v[0], v[1]);
      break;
    case Kind::Max:
      r = std::max(v[0], v[1]);
      break;
  }
  if (error->empty() && (r < e->range().lo || r > e->range().hi))
    *error = to_string(e) + " = " + std::to_string(r) + " outside [" +
             std::to_string(e->range().lo) + ", " + std::to_string(e->range().hi) + "]";
  return r;
}

// Rebuilds a canonical expression through the public constructors.
Expr rebuild(Expr e) {
  std::vector<Expr> a;
  for (Expr x : e->args()) a.push_back(rebuild(x));
  switch (e->kind()) {
    case Kind::Const:
    case Kind::Var:
      return e;
    case Kind::Add: {
      Expr r = a[0];
      for (size_t i = 1; i < a.size(); ++i) r = r + a[i];
      return r;
    }
    case Kind::Mul: {
      Expr r = a[0];
      for (size_t i = 1; i < a.size(); ++i) r = r * a[i];
      return r;
    }
    case Kind::FloorDiv:
      return floordiv(a[0], a[1]);
    case Kind::Mod:
      return mod(a[0], a[1]);
    case Kind::Min:
      return min(a[0], a[1]);
    case Kind::Max:
      return max(a[0], a[1]);
  }
  return nullptr;
}

int rounds() {
  const char* s = std::getenv("COIL_SYM_FUZZ_ROUNDS");
  return s ? std::max(1, std::atoi(s)) : 1;
}

constexpr int kExpressions = 2500;

}  // namespace

TEST(SymFuzz, SimplifiedAgreesWithReferenceAndStaysInRange) {
  int64_t points = 0;
  for (int round = 0; round < rounds(); ++round) {
    Generator gen(1000 + round);
    for (int n = 0; n < kExpressions; ++n) {
      TreeP t = gen.tree(4);
      Expr e = build(*t);
      bool used[kNumVars] = {};
      mark_vars(*t, used);
      for_each_point(used, [&](const int64_t* env) {
        ++points;
        int64_t want = eval(*t, env);
        std::string error;
        int64_t got = eval_checking_ranges(e, env, &error);
        ASSERT_EQ(error, "") << show(*t) << " -> " << to_string(e) << " at " << point_str(env);
        ASSERT_EQ(got, want) << show(*t) << " -> " << to_string(e) << " at " << point_str(env);
        ASSERT_EQ(evaluate(e, bindings_of(env)), want) << show(*t) << " at " << point_str(env);
      });
      if (HasFatalFailure()) return;
    }
  }
  EXPECT_GT(points, 100000);  // the volume the brute force promises
}

TEST(SymFuzz, CanonicalFormIsAFixpoint) {
  for (int round = 0; round < rounds(); ++round) {
    Generator gen(2000 + round);
    for (int n = 0; n < kExpressions; ++n) {
      TreeP t = gen.tree(4);
      Expr e = build(*t);
      ASSERT_EQ(build(*t), e) << "interning: " << show(*t);
      Expr again = rebuild(e);
      ASSERT_EQ(again, e) << show(*t) << " -> " << to_string(e) << " -> " << to_string(again);
    }
  }
}

TEST(SymFuzz, ConstantStrideHoldsAtEveryPoint) {
  int affine = 0;
  for (int round = 0; round < rounds(); ++round) {
    Generator gen(3000 + round);
    for (int n = 0; n < kExpressions; ++n) {
      TreeP t = gen.tree(4);
      Expr e = build(*t);
      bool used[kNumVars] = {};
      mark_vars(*t, used);
      for (int v = 0; v < kNumVars; ++v) {
        int64_t stride = 0;
        if (!constant_stride(e, sym_var(v), &stride)) continue;
        ++affine;
        for_each_point(used, [&](const int64_t* env) {
          if (env[v] == kRanges[v].hi) return;
          int64_t next[kNumVars];
          std::copy(env, env + kNumVars, next);
          ++next[v];
          ASSERT_EQ(eval(*t, next) - eval(*t, env), stride)
              << show(*t) << " -> " << to_string(e) << " along " << kNames[v] << " at "
              << point_str(env);
        });
        if (HasFatalFailure()) return;
      }
    }
  }
  EXPECT_GT(affine, 1000);
}

TEST(SymFuzz, SubstituteComposes) {
  for (int round = 0; round < rounds(); ++round) {
    Generator gen(4000 + round);
    for (int n = 0; n < kExpressions; ++n) {
      TreeP t = gen.tree(4);
      int v = static_cast<int>(gen.pick(kNumVars));
      // The replacement is clamped into v's range: e was simplified knowing v lies there.
      TreeP by = node(Op::Min, node(Op::Max, gen.tree(2), leaf(Op::Const, kRanges[v].lo)),
                      leaf(Op::Const, kRanges[v].hi));
      TreeP composed = substitute_tree(t, v, by);
      Expr e = substitute(build(*t), {{sym_var(v), build(*by)}});
      bool used[kNumVars] = {};
      mark_vars(*composed, used);
      for_each_point(used, [&](const int64_t* env) {
        ASSERT_EQ(evaluate(e, bindings_of(env)), eval(*composed, env))
            << show(*t) << " with " << kNames[v] << " = " << show(*by) << " -> " << to_string(e)
            << " at " << point_str(env);
      });
      if (HasFatalFailure()) return;
    }
  }
}
