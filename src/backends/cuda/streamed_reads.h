// Which loads of a row kernel take the streaming hint (coil_ld_stream: ld.global.cs, evict
// first), so that the L2 cache keeps what later kernels read instead: Inductor gives a buffer's
// last use in a looped reduction eviction_policy='evict_first' the same way.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "codegen/kernel_rewrites.h"
#include "sym/expr.h"

namespace coil::cuda {

struct StreamedReads {
  std::vector<std::set<std::string>> per_pass;  // the buffers each pass streams
  sym::Expr row, r;                             // the row kernel's variables

  // Whether pass `pass` reads `buffer` at `index` with the hint: a buffer it streams, read
  // consecutively along r (the row's threads read it together) and a different element for
  // each row (not a weight every row reads again).
  bool streams(const std::string& buffer, size_t pass, sym::Expr index) const;
};

// For a row kernel whose threads loop over each row together (a row a block or a warp): each
// of `readable` (its final reads that no write of it may alias) in the last pass that reads it.
StreamedReads streamed_reads(const std::vector<codegen::RowBlock>& passes,
                             const std::set<std::string>& readable, sym::Expr row, sym::Expr r);

}  // namespace coil::cuda
