// Rewrites of a scheduled kernel before a backend prints it: each turns a node the
// chosen loop strategy cannot compute as it stands into plain nodes that it can, so the printers
// only print. Both act on copies; the schedule is not changed.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "schedule/kernel.h"

namespace coil::codegen {

// A row kernel's statements in order: passes of the inner loops ("sections", each ending where
// a node needs a reduction computed in it) and, between them, nodes run once per outer point.
struct RowBlock {
  std::vector<const schedule::KernelNode*> section;  // empty for an outer node
  const schedule::KernelNode* outer = nullptr;
};
std::vector<RowBlock> row_blocks(const schedule::Kernel& k);

// A row kernel's variances (Welford's M2 over the inner loops) computed in two passes instead:
// the row's sum in the pass the variance was in (a Sum of the same values there, as layer norm's
// mean, or a new node `X_sum`), the mean once per row (`X_mean`), then a pass of the squared
// deviations from it, a Sum stored as X. No division per step, and as exact. Only for the
// variances `two_pass` accepts; the others stay Welford updates.
schedule::Kernel two_pass_variances(
    const schedule::Kernel& k,
    const std::function<bool(const schedule::KernelNode& n, const schedule::Kernel& k)>& two_pass);

// A reduction along an outer dim of memory as the column strategy folds it: a chunk of outputs
// is set to each reduction's start value (`init`), then every reduction step folds into the
// outputs (`fold`), a pointwise node each. Welford's variance keeps its running means in an
// array of the chunk (`welford_means`, named `wmean_X`), updated with one shared 1/count.
struct ColumnFold {
  std::vector<schedule::KernelNode> init, fold;
  std::vector<std::pair<std::string, DType>> welford_means;  // chunk arrays, one per variance
};
// `chunk_start` is the first output column of the chunk the fold works on.
ColumnFold column_fold(const schedule::Kernel& k, sym::Expr chunk_start);
// Whether the column strategy folds `k`: Sum, Prod, Max and Min by one operation, Welford's
// variance by its running means.
bool column_foldable(ir::ReduceKind k);

}  // namespace coil::codegen
