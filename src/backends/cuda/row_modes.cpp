#include "backends/cuda/row_modes.h"

#include <algorithm>
#include <set>
#include <string>

namespace coil::cuda {

using ir::ReduceKind;
using schedule::Kernel;
using schedule::KernelNode;

namespace {

constexpr int64_t kRowBlock = 256;
// Rows of a fixed length at most this long take one thread each instead of a block: a block
// of 32 threads for a row of a few elements left most of them idle and launched a block per
// row (a bias-like gradient summed over a batch of 8 was millions of blocks), and consecutive
// threads then read consecutive rows' elements, which a column's layout needs.
constexpr int64_t kThreadRowMax = 32;
// A column kernel (rows whose elements lie a stride apart, consecutive rows' side by side: a
// softmax over dim 0, a bias's gradient summed over a batch) takes 32 rows per block and
// kColumnParts threads down each, so that a warp reads 32 consecutive elements; a block per row
// reads one element per 32-byte sector. Only with enough rows to give every multiprocessor a
// block: with fewer (GPT-2's 768 bias gradients: 24 blocks) the block per row, whose blocks
// fill the GPU, was faster; few long columns are split by lowering first (split_columns in
// src/lower/reduce.cpp), so that their partials are such a kernel.
constexpr int64_t kColumnMinRows = 4096;
// Rows of a fixed length up to this long that no group below covers, when there are at least
// kWarpMinRows of them, take a warp each (eight a block): a block per row of 512 scores kept
// half its threads idle and met at two barriers per reduction; a warp reduces with shuffles
// alone. Fewer rows keep a block each, whose blocks fill the GPU.
constexpr int64_t kWarpRowMax = 1024;
constexpr int64_t kWarpMinRows = 2048;
// Rows of a fixed length that a group of threads covers in runs of four elements, at most
// kGroupMaxVectors runs a thread, take such a group each: every pass over the row is unrolled
// over the thread's runs, so that all its loads are in flight at once, and the inputs that
// several passes read are read from memory once, into registers (cuda_kernel.cpp). A
// hand-written layer norm and softmax showed the shape: 128 threads a row with two to eight
// runs each (bench/probes/row_kernels.cu). The group sizes in order of
// preference, each taken only where it gives every thread at least two runs (a row of 768 is
// 64 threads of three runs); 256 for rows too long for 128. A group of more than a warp meets
// at one barrier per reduction (coil_group_all_reduce), so a block holds no row past the end.
// A row of run-time length is grouped by its hint.
constexpr int64_t kGroupMaxVectors = 8;
// Groups narrower than this share a block, enough rows to fill it, where the rows divide (a
// block of 32 threads would hold a multiprocessor to a quarter of its threads). A 128-thread
// group keeps its block: the probe's layer norm + GELU took 0.0230 ms at a row a block against
// 0.0242 ms at two (a run before had them 0.0239 / 0.0236), and the generated kernel over a
// row of run-time length, a row a block, ran 0.91x the time of the static one at two rows a
// block in two sessions' comparisons on the H200.
constexpr int64_t kGroupBlock = 128;
constexpr int64_t kGroupSizes[] = {128, 64, 32, 256};

// Whether `index` differs between the first rows at r = 0: a value a row reads that the next
// row reads too (a layer norm's statistics per token, read by each of a block's 32 columns) is
// one broadcast load in a column kernel, and no reason to read along rows.
bool changes_with_row(sym::Expr index, sym::Expr row, sym::Expr r) {
  auto at = [&](int64_t k) {
    return sym::substitute(index, {{row, sym::constant(k)}, {r, sym::constant(0)}});
  };
  return at(0) != at(1) || at(1) != at(2);
}

// Whether the row kernel `k` reads more of its inputs column-wise (consecutive elements for
// consecutive rows) than along its rows, and has no arg reduction (whose index a column
// reduction does not carry). A load that is the same all along a row (a row's mean, its
// maximum) counts neither way.
bool reads_columns(const Kernel& k, const ir::Program& program) {
  const sym::Expr row = sym::index_var("row", sym_numel(k.outer));
  const sym::Expr r = sym::index_var("r", sym_numel(k.inner));
  sym::Bindings b;
  bind_flat(b, k.outer_vars, k.outer, row);
  bind_flat(b, k.inner_vars, k.inner, r);
  const Kernel bk = bound(k, b);
  std::set<std::string> computed;
  for (const KernelNode& n : bk.nodes) computed.insert(n.buffer);
  std::set<std::pair<std::string, const void*>> seen;
  int across = 0, along = 0;
  for (const KernelNode& n : bk.nodes) {
    if (n.reduce == ReduceKind::ArgMax || n.reduce == ReduceKind::ArgMin) return false;
    ir::for_each_load(n.body, [&](const ir::ValueNode& load) {
      if (load.is_indirect() || computed.count(load.buffer()) ||
          !sym::depends_on(load.index(), r) ||
          !seen.emplace(load.buffer(), load.index().get()).second)
        return;
      across += ir::mostly_steps_by_one(program, load.index(), row, {r});
      along += sym::steps_by_one(load.index(), r) && changes_with_row(load.index(), row, r);
    });
  }
  return across > along;
}

// Whether a warp's shuffles can combine every reduction of `k`: not an arg reduction (a value
// and its index) nor a bool one.
bool warp_reducible(const Kernel& k) {
  return std::none_of(k.nodes.begin(), k.nodes.end(), [](const KernelNode& n) {
    return n.reduce && (n.reduce == ReduceKind::ArgMax || n.reduce == ReduceKind::ArgMin ||
                        n.body->dtype() == kBool);
  });
}

// The runs of `width` a thread of `group` takes over a row of `r_numel`, or 0 where the group
// does not cover the row in whole runs, at most kGroupMaxVectors runs of four elements' worth a
// thread (so wider runs of 16-bit values are fewer, and rows in registers no longer).
int64_t group_vectors(int64_t r_numel, int64_t group, int64_t width) {
  const int64_t vectors = r_numel / (width * group);
  return r_numel % (width * group) == 0 && vectors * width <= kGroupMaxVectors * kVector ? vectors
                                                                                         : 0;
}

// RowLaunch::width for `k` held in registers (per_group): whether the narrowest of its accesses
// along the row (the loads of buffers it does not compute, the stores of its pointwise nodes) is
// of 16-bit values. Rows looped over keep four, and rows in registers no more elements a thread
// than float32's: with eight elements a run and runs up to kGroupMaxVectors, a bfloat16 sum over
// rows of 4M took its 16384-long partial rows into registers and went from 25.8 to 27-28 us on
// the H200; rows in registers within float32's length gained or held (instance norm 18.1 ->
// 17, softmax 47.9 -> 48, layer norm + GELU 22.5 -> 22).
int64_t row_width(const Kernel& k) {
  const sym::Expr r = sym::index_var("r", sym_numel(k.inner));
  sym::Bindings b;
  bind_flat(b, k.inner_vars, k.inner, r);
  const Kernel bk = bound(k, b);
  std::set<std::string> computed;
  for (const KernelNode& n : bk.nodes) computed.insert(n.buffer);
  size_t narrowest = 8;
  for (const KernelNode& n : bk.nodes) {
    if (n.store && !n.reduce && sym::depends_on(n.store_index, r))
      narrowest = std::min(narrowest, itemsize(n.dtype));
    ir::for_each_load(n.body, [&](const ir::ValueNode& load) {
      if (!load.is_indirect() && !computed.count(load.buffer()) && sym::depends_on(load.index(), r))
        narrowest = std::min(narrowest, itemsize(load.dtype()));
    });
  }
  return narrowest == 2 ? kWideVector : kVector;
}

}  // namespace

Kernel bound(const Kernel& k, const sym::Bindings& b) {
  Kernel out = k;
  for (KernelNode& n : out.nodes) {
    n.body = ir::substitute(n.body, b);
    n.store_index = sym::substitute(n.store_index, b);
  }
  return out;
}

void bind_flat(sym::Bindings& b, const std::vector<sym::Expr>& vars, const SymShape& sizes,
               sym::Expr flat) {
  std::vector<sym::Expr> parts = ir::unravel(flat, sizes);
  for (size_t d = 0; d < vars.size(); ++d) b.emplace(vars[d], parts[d]);
}

RowLaunch row_launch(const Kernel& k, const ir::Program& program) {
  // The block's width from the row length at the hints; every length loops over the row.
  const int64_t r_numel = program.hint(sym_numel(k.inner));
  const sym::Expr rows = sym_numel(k.outer);
  // Only a length fixed at compile time: a row of run-time length may be long, and one thread
  // would then fold it alone, slowly and (for float sums) less accurately than a block's tree.
  const bool fixed = sym_numel(k.inner)->is_const();
  if (fixed && r_numel <= kThreadRowMax)
    return {RowMode::per_thread, kRowBlock, sym::floordiv(rows + (kRowBlock - 1), kRowBlock)};
  if (program.hint(rows) >= kColumnMinRows && r_numel >= kColumnParts && reads_columns(k, program))
    return {RowMode::columns, 32 * kColumnParts, sym::floordiv(rows + 31, 32)};
  // A run-time length chooses its group by the hint: rows of whole runs of the group, up to
  // the hint's length, take the unrolled passes; others loop over the row (cuda_kernel.cpp).
  const int64_t width = row_width(k);
  if (warp_reducible(k)) {
    for (int64_t min_vectors : {2, 1})
      for (int64_t group : kGroupSizes) {
        const int64_t vectors = group_vectors(r_numel, group, width);
        if (vectors < min_vectors) continue;
        // Several rows a block for narrow groups where there are rows enough to fill the GPU
        // and they divide (a block never has a row past the end: its threads meet at barriers).
        int64_t per_block = std::max<int64_t>(1, kGroupBlock / group);
        if (program.hint(rows) < kWarpMinRows || !rows->is_const() ||
            rows->value() % per_block != 0)
          per_block = 1;
        return {RowMode::per_group,
                group * per_block,
                sym::floordiv(rows, per_block),
                group,
                vectors,
                false,
                width};
      }
  }
  if (fixed && r_numel <= kWarpRowMax && program.hint(rows) >= kWarpMinRows && warp_reducible(k))
    return {RowMode::per_warp, kRowBlock,
            sym::floordiv(rows + (kRowBlock / 32 - 1), kRowBlock / 32)};
  return {RowMode::per_block,
          r_numel >= kRowBlock ? kRowBlock : std::max<int64_t>(32, (r_numel + 31) / 32 * 32), rows};
}

std::vector<RowLaunch> row_launch_alternatives(const Kernel& k, const ir::Program& program) {
  const RowLaunch chosen = row_launch(k, program);
  const sym::Expr rows = sym_numel(k.outer);
  const int64_t r_numel = program.hint(sym_numel(k.inner));
  std::vector<RowLaunch> out;
  const int64_t width = row_width(k);
  if (chosen.mode == RowMode::per_group) {
    for (int64_t group : kGroupSizes) {
      const int64_t vectors = group_vectors(r_numel, group, width);
      if (vectors == 0) continue;
      for (int64_t per_block : {1, 2, 4}) {
        if (group * per_block > 1024 ||
            (group == chosen.group && group * per_block == chosen.block))
          continue;
        if (per_block > 1 && (!rows->is_const() || rows->value() % per_block != 0)) continue;
        out.push_back({RowMode::per_group, group * per_block, sym::floordiv(rows, per_block), group,
                       vectors, false, width});
      }
    }
  } else if (chosen.mode == RowMode::per_block) {
    for (int64_t block : {128, 256, 512, 1024})
      if (block != chosen.block && block <= std::max<int64_t>(r_numel, 128))
        out.push_back({RowMode::per_block, block, chosen.grid});
    if (sym_numel(k.inner)->is_const() && r_numel % width == 0 && warp_reducible(k))
      for (int64_t group : {128, 256}) {
        const int64_t vectors = (r_numel / width + group - 1) / group;
        if (vectors >= 2 && vectors <= kGroupMaxVectors)
          out.push_back({RowMode::per_group, group, rows, group, vectors,
                         r_numel % (width * group) != 0, width});
      }
  }
  return out;
}

}  // namespace coil::cuda
