// Expressions read as linear combinations: the view the sum and floor-div/mod rules work on.
// A canonical expression is `c0 + c1*t1 + ... + cn*tn` where each core ti is a Var, a product
// of non-constant factors, a FloorDiv, a Mod, a Min or a Max, and no two cores are equal.
#pragma once

#include <vector>

#include "sym/expr.h"

namespace coil::sym::detail {

struct Term {
  int64_t coef;
  Expr core;
};

struct Sum {
  std::vector<Term> terms;
  int64_t constant = 0;
};

// `e` as a coefficient times a core; `e` is neither a Const nor an Add.
Term as_term(Expr e);
// `e` as a sum of terms (one term for a non-Add, none for a Const).
Sum as_sum(Expr e);
// The canonical expression of a sum whose terms may repeat cores, in any order.
Expr from_sum(Sum s);
// coef * core for a core as above, without re-simplifying the core.
Expr scale(Expr core, int64_t coef);

}  // namespace coil::sym::detail
