// A kernel's loop nest and the re-indexing of each member over it: a member's own index
// variables become expressions of the kernel's loop variables (through the row-major flat
// index, which the index algebra simplifies back to plain variables where the shapes agree),
// and adjacent loops merge when every access allows it (Inductor's simplify_loops).
#pragma once

#include "schedule/kernel.h"

namespace coil::schedule {

struct LoopNest {
  SymShape outer, inner;
  std::vector<sym::Expr> xs, rs;
};

// The loops of a kernel over `members`: those of its first reduction, else of its first member.
LoopNest loop_nest(const std::vector<const ir::Buffer*>& members);
// `b` over the loops of `loops`.
KernelNode translate(const ir::Buffer& b, const LoopNest& loops);
// The kernel over `members`, its loops merged and size-1 loops dropped, named by its ops and
// `number`.
Kernel build_kernel(const std::vector<const ir::Buffer*>& members, int number);

}  // namespace coil::schedule
