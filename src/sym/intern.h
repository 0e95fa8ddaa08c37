// The internals shared by the simplifier's files: raw node construction (no simplification)
// and the structural order. Only src/sym/ includes this.
#pragma once

#include <string>
#include <vector>

#include "sym/expr.h"

namespace coil::sym {

// Owns every node. get() returns the one node with these fields, creating it on first request;
// nodes live until the process exits.
struct Interner {
  static Expr get(Kind kind, int64_t value, const std::string& name, std::vector<Expr> args,
                  Range range, Expr bound = nullptr);
};

namespace detail {

// The node `kind(args...)`, interned as is: the caller guarantees `args` already are the
// canonical operands of `kind` (sorted, folded), so no rule applies.
Expr make(Kind kind, std::vector<Expr> args);

// The values a node of `kind` over `args` can take, by interval arithmetic on their ranges.
Range range_of(Kind kind, const std::vector<Expr>& args);

// The total structural order behind less(): negative, zero or positive.
int compare(Expr a, Expr b);

}  // namespace detail
}  // namespace coil::sym
