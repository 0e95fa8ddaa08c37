// What a symbolic coil::SymInt holds (include/coil/symint.h): an expression over a dynamic
// graph's size symbols and the ShapeEnv they belong to, which guards what code decides on it.
#pragma once

#include <memory>

#include <coil/symint.h>

#include "graph/arg.h"
#include "graph/graph.h"
#include "graph/shape_env.h"

namespace coil {

namespace detail {
struct SymNode {
  sym::Expr expr;
  std::shared_ptr<ShapeEnv> env;
};
}  // namespace detail

// A SymInt for `e` in `env`: a plain number when `e` is a constant.
SymInt make_symint(sym::Expr e, const std::shared_ptr<ShapeEnv>& env);
// SymInts as an op argument: a Shape when all are plain numbers, else a SymIntsArg.
Arg symints_arg(const SymInts& sizes);
// One SymInt as an op argument: an int64 or a SymIntArg.
Arg symint_arg(const SymInt& size);
// The same size as written (the same expression, or the same number): no guard.
bool same_symint(const SymInt& a, const SymInt& b);

// Sizes over `g`'s symbols as an argument of a node of `g` (what passes and decompositions
// emit): a Shape when static, else a SymIntsArg with the hints.
NodeArg shape_arg(const Graph& g, const SymShape& s);
// One size as a scalar argument: an int, or a SymIntArg.
NodeArg size_arg(const Graph& g, sym::Expr n);

}  // namespace coil
