// How the threads of a CUDA row kernel (a reduction's rows, with the passes over each) take its
// rows: a block each, a warp each, a group of threads each with the row in registers, a thread
// each, or 32 columns a block; with the block's width and the grid. Also the binding of a kernel's
// loop variables to the thread's indices, which the choice and the printer share.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cuda/vector_access.h"
#include "ir/program.h"
#include "schedule/kernel.h"

namespace coil::cuda {

// A column kernel takes 32 rows (columns of memory) a block and this many threads down each.
inline constexpr int64_t kColumnParts = 16;

enum class RowMode { per_block, per_warp, per_group, per_thread, columns };

struct RowLaunch {
  RowMode mode;
  int64_t block;   // threads
  sym::Expr grid;  // blocks
  // per_group: `group` threads a row (block / group rows a block), each holding `vectors` runs
  // of `width` consecutive elements of it, the runs group * width elements apart.
  int64_t group = 0, vectors = 0;
  // per_group over a row of a fixed length that the group's runs do not cover exactly (a
  // multiple of the width): the last runs of some threads lie past the row's end and are skipped.
  bool ragged = false;
  // Elements per vector access along the row: for per_group, kWideVector where the narrowest of
  // the row's accesses is of 16-bit values (16 bytes of them, as four float32's); else kVector.
  int64_t width = kVector;
};

// The launch of the row kernel `k` (its variances already two passes).
RowLaunch row_launch(const schedule::Kernel& k, const ir::Program& program);

// Other launches of the same kernel (mode="max-autotune" times them): for rows in registers,
// the other groups that cover the row and other numbers of rows a block; for rows a block,
// other block widths, and groups of 128 or 256 threads holding the row in registers with the
// last runs ragged (a row of 3136, an instance norm's plane, as 7 runs of 128 threads). None
// for the other modes.
std::vector<RowLaunch> row_launch_alternatives(const schedule::Kernel& k,
                                               const ir::Program& program);

// `k`'s nodes with its loop variables bound to expressions of the thread's indices.
schedule::Kernel bound(const schedule::Kernel& k, const sym::Bindings& b);

// Each of `vars` (sizes `sizes`) as an expression of the flat index `flat`.
void bind_flat(sym::Bindings& b, const std::vector<sym::Expr>& vars, const SymShape& sizes,
               sym::Expr flat);

}  // namespace coil::cuda
