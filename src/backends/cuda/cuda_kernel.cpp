#include "backends/cuda/cuda_kernel.h"

#include <deque>
#include <map>
#include <set>

#include <coil/error.h>

#include "backends/cuda/cuda_expr.h"
#include "backends/cuda/row_modes.h"
#include "backends/cuda/streamed_reads.h"
#include "backends/cuda/vector_access.h"
#include "codegen/code_writer.h"
#include "codegen/kernel_args.h"
#include "codegen/kernel_rewrites.h"

namespace coil::cuda {

namespace {

using codegen::CodeWriter;
using codegen::KernelSource;
using ir::ReduceKind;
using schedule::Kernel;
using schedule::KernelNode;

constexpr int64_t kPointwiseBlock = 256;
// The kernel parameter holding the divider of its k-th run-time divisor.
std::string divider_name(size_t k) { return "coil_dv" + std::to_string(k); }

std::string head(const std::string& name, const std::vector<std::string>& args,
                 const std::set<std::string>& written, const ir::Program& p,
                 const std::set<std::string>& aliased, bool checks,
                 const std::vector<sym::Expr>& symbols, const std::vector<sym::Expr>& divisors,
                 int64_t block) {
  std::string h =
      "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(block) + ") " + name + "(";
  for (size_t i = 0; i < args.size(); ++i) {
    const bool w = written.count(args[i]) > 0;
    h += std::string(i ? ", " : "") + (w ? "" : "const ") +
         memory_type(p.buffer(args[i]).layout.dtype) +
         (aliased.count(args[i]) ? "* " : "* __restrict__ ") + args[i];
  }
  if (checks) h += std::string(args.empty() ? "" : ", ") + "i64* index_error";
  // A dynamic graph's sizes, by value.
  for (sym::Expr s : symbols)
    h += std::string(args.empty() && !checks && s == symbols[0] ? "" : ", ") + "i64 " + s->name();
  // Their dividers, each named after its divisor (kernels that divide differently differ).
  for (size_t k = 0; k < divisors.size(); ++k)
    h += ", coil_divider " + divider_name(k) + " /* " + sym::to_c(divisors[k]) + " */";
  return h + ")";
}

class Printer {
 public:
  Printer(const Kernel& k, const ir::Program& p, KernelSource& src, int64_t pointwise_block,
          std::set<std::string> streamable = {})
      : k_(k),
        p_(p),
        src_(src),
        pointwise_block_(pointwise_block),
        streamable_(std::move(streamable)) {
    for (const KernelNode& n : k.nodes) nodes_[n.buffer] = &n;
  }

  CudaEmitter emitter() {
    CudaEmitter em(w_, counter_);
    for (const auto& [buffer, text] : outer_) em.forward(buffer, text);
    em.recompute = [this](const std::string& b) -> std::optional<ir::Value> {
      auto it = nodes_.find(b);
      if (it == nodes_.end() || it->second->store || it->second->reduce) return std::nullopt;
      return it->second->body;
    };
    em.checks = &src_.index_checks;
    em.divider = [this](sym::Expr d) { return divider(d); };
    if (!streamed_.per_pass.empty())
      em.stream_load = [this](const ir::ValueNode& l) {
        return streamed_.streams(l.buffer(), pass_, l.index());
      };
    return em;
  }

  // A pointwise kernel bound to its flat index i (< numel), ready to print: its vector
  // accesses, and the number of blocks of pointwise_block_ threads it takes.
  struct Pointwise {
    const Kernel* bound;
    sym::Expr i, numel;
    std::vector<VectorAccess> vectors;
    sym::Expr blocks;
  };
  // Vector accesses along `var` (a pointwise kernel's i, a row kernel's r), element coil_j.
  struct Lanes {
    const std::vector<VectorAccess>& vectors;
    sym::Expr var;
    std::vector<std::string> checked = {};  // run-time checks the vector path made (run_uniform's)
    int64_t width = kVector;                // elements per access
  };

  // The statements of `nodes` at one point: pointwise values forwarded and stored (in a
  // vectorised body, to the store's register array, element coil_j).
  void point(CudaEmitter& em, const std::vector<const KernelNode*>& nodes,
             const Lanes* lanes = nullptr) {
    for (const KernelNode* n : nodes) {
      std::string v = em.emit(n->body);
      em.forward(n->buffer, v);
      if (!n->store) continue;
      const VectorAccess* vec = lanes ? find(*lanes, n->buffer, n->store_index) : nullptr;
      em.line((vec ? vec->name + ".v[coil_j]" : n->buffer + "[" + em.index(n->store_index) + "]") +
              " = " + to_memory(n->dtype, v) + ";");
    }
  }

  // When every store writes consecutive elements for consecutive i, each thread takes a vector
  // of them (pointwise_vector_accesses's width): the stores, and the loads that are consecutive
  // too, with vector accesses.
  Pointwise pointwise(const Kernel& k) {
    const sym::Expr numel = sym_numel(k.outer);
    sym::Expr i = sym::index_var("i", numel);
    sym::Bindings b;
    bind_flat(b, k.outer_vars, k.outer, i);
    bound_.push_back(bound(k, b));
    const Kernel& bk = bound_.back();
    for (const KernelNode& n : bk.nodes) nodes_[n.buffer] = &n;
    std::vector<const KernelNode*> nodes;
    for (const KernelNode& n : bk.nodes) nodes.push_back(&n);
    std::vector<VectorAccess> vectors = pointwise_vector_accesses(
        nodes, i, [&](const std::string& b) { return nodes_.count(b) > 0; });
    const int64_t per_block = pointwise_block_ * (vectors.empty() ? 1 : vectors.front().width);
    return {&bk, i, numel, std::move(vectors), sym::floordiv(numel + (per_block - 1), per_block)};
  }

  // Its body, for blocks from `first_block` on. A vectorised thread whose elements are all in
  // range and whose vectors are aligned takes them with vector accesses, else one by one.
  void pointwise_body(const Pointwise& pw, sym::Expr first_block) {
    std::vector<const KernelNode*> nodes;
    for (const KernelNode& n : pw.bound->nodes) nodes.push_back(&n);
    const std::string first =
        first_block->is_const() ? sym::to_c(first_block) : "(" + sym::to_c(first_block) + ")";
    const std::string numel = sym::to_c(pw.numel);
    const std::string thread = "((i64)blockIdx.x - " + first + ") * " +
                               std::to_string(pointwise_block_) + " + threadIdx.x";
    if (pw.vectors.empty()) {
      w_.line("const i64 i = " + thread + ";");
      auto guard = w_.block("if (i < " + numel + ")");
      CudaEmitter em = emitter();
      point(em, nodes);
      return;
    }
    const int64_t width = pw.vectors.front().width;
    const std::string v = std::to_string(width);
    w_.line("const i64 coil_base = (" + thread + ") * " + v + ";");
    std::string fast = "coil_base + " + v + " <= " + numel;
    for (const VectorAccess& a : pw.vectors) fast += " && " + a.aligned();
    // Parameters read once per run where a symbolic size is a multiple of the width: checked.
    std::vector<std::string> checked;
    for (const KernelNode* n : nodes)
      ir::for_each_load(n->body, [&](const ir::ValueNode& load) {
        if (load.is_indirect() || nodes_.count(load.buffer())) return;
        const std::optional<std::string> c = run_uniform(load.index(), pw.i, width);
        if (c && !c->empty() && std::find(checked.begin(), checked.end(), *c) == checked.end())
          checked.push_back(*c);
      });
    for (const std::string& c : checked) fast += " && " + c;
    {
      auto vector_path = w_.block("if (" + fast + ")");
      vector_lanes({pw.vectors, pw.i, checked, width},
                   [&](CudaEmitter& em, const Lanes& lanes) { point(em, nodes, &lanes); });
    }
    auto scalar_path = w_.block("else");
    auto lanes = w_.block("for (int coil_j = 0; coil_j < " + v + "; ++coil_j)");
    w_.line("const i64 i = coil_base + coil_j;");
    auto guard = w_.block("if (i < " + numel + ")");
    CudaEmitter em = emitter();
    point(em, nodes);
  }

  // lanes.width elements from coil_base on, along `lanes.var`: the vectors read, `body` for
  // each element (its loads of them from registers), the vectors written.
  void vector_lanes(const Lanes& lanes,
                    const std::function<void(CudaEmitter&, const Lanes&)>& body) {
    const std::string v = std::to_string(lanes.width);
    for (const VectorAccess& a : lanes.vectors)
      w_.line(a.type() + " " + a.name +
              (a.store            ? ";"
               : !a.cache.empty() ? " = " + a.cache + "[coil_k];"
                                  : " = " + a.load("coil_base") + ";"));
    {
      w_.line("#pragma unroll");
      auto each = w_.block("for (int coil_j = 0; coil_j < " + v + "; ++coil_j)");
      w_.line("const i64 " + sym::to_c(lanes.var) + " = coil_base + coil_j;");
      CudaEmitter em = emitter();
      em.load_override = [&](const ir::ValueNode& load) -> std::optional<std::string> {
        if (const VectorAccess* a = find(lanes, load.buffer(), load.index()))
          return a->store ? std::nullopt
                          : std::optional(from_memory(load.dtype(), a->name + ".v[coil_j]"));
        // The same element for the run's elements (a channel's parameter read by flat index,
        // (i % (C*HW)) // HW with HW a multiple of the width, known or checked): read at the
        // run's first element, so that the run's reads, and what is computed from them alone, are
        // one (the compiler merges the unrolled copies) instead of a division chain each.
        if (load.is_indirect() || nodes_.count(load.buffer()) ||
            !sym::depends_on(load.index(), lanes.var))
          return std::nullopt;
        const std::optional<std::string> c = run_uniform(load.index(), lanes.var, lanes.width);
        if (!c || (!c->empty() && std::find(lanes.checked.begin(), lanes.checked.end(), *c) ==
                                      lanes.checked.end()))
          return std::nullopt;
        const sym::Expr first = sym::index_var("coil_base", lanes.var->range().hi + 1);
        return from_memory(load.dtype(),
                           load.buffer() + "[" +
                               em.index(sym::substitute(load.index(), {{lanes.var, first}})) + "]");
      };
      body(em, lanes);
    }
    for (const VectorAccess& a : lanes.vectors)
      if (a.store)
        w_.line("*reinterpret_cast<" + a.type() + "*>(" + a.at() + " + coil_base) = " + a.name +
                ";");
  }

  // One pass over a row at r: its pointwise nodes, and each reduction folded into its
  // accumulator.
  void fold_pass(CudaEmitter& em, const std::vector<const KernelNode*>& section,
                 const Lanes* lanes) {
    for (const KernelNode* n : section) {
      if (!n->reduce) {
        point(em, {n}, lanes);
        continue;
      }
      std::string v = em.emit(n->body);
      const std::string a = "acc_" + n->buffer;
      const DType dt = n->body->dtype();
      if (n->reduce == ReduceKind::ArgMax || n->reduce == ReduceKind::ArgMin) {
        const std::string kmax = n->reduce == ReduceKind::ArgMax ? "true" : "false";
        em.line("if (coil_arg<" + kmax + ", " + codegen::compute_type(dt) + ">{}.better(" + v +
                ", r, " + a + ", " + a + "_i)) { " + a + " = " + v + "; " + a + "_i = r; }");
      } else {
        em.line(a + " = " + reduce_fold(*n->reduce) + "(" + a + ", " + v + ");");
      }
    }
  }

  // Rows a block each (`threads` meeting in block reductions); with per_warp a row per warp
  // (threads / 32 rows a block, warp shuffles and no block barrier); with per_group a row per
  // `launch.group` threads, each pass unrolled over the thread's runs of four elements and the
  // inputs several passes read held in registers; with per_thread a row per thread, folded in
  // order; with columns 32 rows a block, kColumnParts threads down each.
  void row_body(const Kernel& k, const RowLaunch& launch) {
    Row row = plan_row(k, launch);
    row_prologue(row);
    for (size_t bi = 0; bi < row.blocks.size(); ++bi) {
      pass_ = bi;
      if (row.blocks[bi].outer)
        row_outer_node(row, *row.blocks[bi].outer);
      else
        row_pass(row, bi);
    }
  }

  CodeWriter& writer() { return w_; }
  const std::vector<sym::Expr>& divisors() const { return divisors_; }

 private:
  // A row kernel being printed: its launch, its size expressions and the kernel bound to them,
  // its passes with their vector accesses, and (per_group) the inputs held in registers.
  struct Row {
    RowLaunch launch;
    sym::Expr rows, r_numel, r;
    std::string rn;            // r_numel in C
    std::string first_thread;  // the guard of a row's stores: its first thread
    std::vector<codegen::RowBlock> blocks;
    std::vector<std::vector<VectorAccess>> pass_vectors;
    std::vector<VectorAccess> cached;
    int reduction = 0;  // per_group: the next reduction's slot in coil_smem
    RowMode mode() const { return launch.mode; }
    std::string group() const { return std::to_string(launch.group); }
  };

  Row plan_row(const Kernel& k, const RowLaunch& launch) {
    Row row{launch,
            sym_numel(k.outer),
            sym_numel(k.inner),
            nullptr,
            "",
            "if (threadIdx.x == 0) ",
            {},
            {},
            {}};
    const RowMode mode = launch.mode;
    const sym::Expr row_var = sym::index_var("row", row.rows);
    row.r = sym::index_var("r", row.r_numel);
    row.rn = sym::to_c(row.r_numel);
    sym::Bindings b;
    bind_flat(b, k.outer_vars, k.outer, row_var);
    bind_flat(b, k.inner_vars, k.inner, row.r);
    bound_.push_back(bound(k, b));
    const Kernel& bk = bound_.back();
    nodes_.clear();
    for (const KernelNode& n : bk.nodes) nodes_[n.buffer] = &n;
    row.blocks = codegen::row_blocks(bk);
    // Each pass's vector accesses (none where it keeps to the scalar loop), and for per_group
    // the registers of the inputs read by several passes.
    row.pass_vectors.resize(row.blocks.size());
    for (size_t i = 0; i < row.blocks.size(); ++i) {
      if (row.blocks[i].outer || mode == RowMode::per_thread || mode == RowMode::columns) continue;
      std::vector<VectorAccess> v = vector_accesses(row.blocks[i].section, row.r, launch.width);
      if (std::any_of(v.begin(), v.end(), [](const VectorAccess& a) { return !a.store; }))
        row.pass_vectors[i] = std::move(v);
    }
    if (mode == RowMode::per_group) row.cached = cache_rows(row.pass_vectors, launch.vectors);
    // Where a row's threads loop over it together, a final read in the last pass that reads it
    // takes the streaming hint. Rows in registers (per_group) keep plain loads, as Inductor's
    // persistent reductions do: the hint made softmax's slower there.
    if (mode == RowMode::per_warp || mode == RowMode::per_block) {
      streamed_ = streamed_reads(row.blocks, streamable_, row_var, row.r);
      for (size_t i = 0; i < row.blocks.size(); ++i)
        for (VectorAccess& a : row.pass_vectors[i])
          a.stream = !a.store && streamed_.streams(a.buffer, i, a.offset + row.r);
    }
    return row;
  }

  // The kernel's first lines: which row the thread works on, the shared memory its reductions
  // meet in, and the guard of a row's stores.
  void row_prologue(Row& row) {
    const std::string threads = std::to_string(row.launch.block), rows = sym::to_c(row.rows);
    switch (row.mode()) {
      case RowMode::per_group:
        per_group_prologue(row);
        break;
      case RowMode::per_warp:
        // A warp past the last row leaves whole: nothing in this kernel waits for it.
        w_.line("const int coil_lane = threadIdx.x & 31;");
        w_.line("const i64 row = (i64)blockIdx.x * " + std::to_string(row.launch.block / 32) +
                " + (threadIdx.x >> 5);");
        w_.line("if (row >= " + rows + ") return;");
        row.first_thread = "if (coil_lane == 0) ";
        break;
      case RowMode::per_thread:
        w_.line("const i64 row = (i64)blockIdx.x * " + threads + " + threadIdx.x;");
        w_.line("if (row >= " + rows + ") return;");
        row.first_thread = "";
        break;
      case RowMode::columns:
        w_.line("__shared__ double coil_smem[" + std::to_string(32 * kColumnParts) + "];");
        // Threads past the last row fold nothing and store nothing; their row is the last one,
        // so that what every thread computes per row reads in bounds.
        w_.line("const i64 coil_col = (i64)blockIdx.x * 32 + (threadIdx.x & 31);");
        w_.line("const bool coil_live = coil_col < " + rows + ";");
        w_.line("const i64 row = coil_live ? coil_col : " + rows + " - 1;");
        row.first_thread = "if (coil_live && threadIdx.x < 32) ";
        break;
      case RowMode::per_block:
        w_.line("__shared__ double coil_smem[66];");
        w_.line("const i64 row = blockIdx.x;");
        break;
    }
  }

  void per_group_prologue(Row& row) {
    const RowLaunch& launch = row.launch;
    const std::string group = row.group();
    w_.line("const int coil_t = threadIdx.x % " + group + ";");
    w_.line("const i64 row = (i64)blockIdx.x * " + std::to_string(launch.block / launch.group) +
            " + threadIdx.x / " + group + ";");
    row.first_thread = "if (coil_t == 0) ";
    int reductions = 0;
    for (const KernelNode& n : bound_.back().nodes) reductions += n.reduce.has_value();
    if (launch.group > 32)
      w_.line("__shared__ double coil_smem[" + std::to_string(reductions * launch.block / 32) +
              "];");
    // One check of every pass's vectors: the unrolled passes, or all of them one by one. A row
    // of run-time length takes them where it is whole runs of the group, up to the length the
    // runs were made for (a run past its end is skipped, the same in every thread of the row).
    std::string fast = aligned(row.pass_vectors);
    if (!row.r_numel->is_const())
      fast = "(" + row.rn + ") % " + std::to_string(launch.group * launch.width) + " == 0 && " +
             row.rn + " <= " + std::to_string(launch.group * launch.vectors * launch.width) +
             " && " + fast;
    w_.line("const bool coil_fast = " + fast + ";");
    for (const VectorAccess& a : row.cached)
      w_.line(a.type() + " " + a.cache + "[" + std::to_string(launch.vectors) + "];");
    if (!row.cached.empty()) {
      auto fast_path = w_.block("if (coil_fast)");
      auto runs = unrolled_runs(launch, row.r_numel);
      for (const VectorAccess& a : row.cached)
        w_.line(a.cache + "[coil_k] = " + a.load("coil_base") + ";");
    }
  }

  // A node computed once per row, outside the passes.
  void row_outer_node(const Row& row, const KernelNode& n) {
    CudaEmitter em = emitter();
    std::string v = em.emit(n.body);
    outer_[n.buffer] = v;
    if (n.store)
      em.line(row.first_thread + n.buffer + "[" + em.index(n.store_index) +
              "] = " + to_memory(n.dtype, v) + ";");
  }

  // One pass over the row: its reductions' accumulators, the thread's elements folded into
  // them, and their results combined across the row's threads.
  void row_pass(Row& row, size_t bi) {
    const codegen::RowBlock& blk = row.blocks[bi];
    for (const KernelNode* n : blk.section) {
      if (!n->reduce) continue;
      const DType dt = n->body->dtype();
      w_.line(std::string(codegen::compute_type(dt)) + " acc_" + n->buffer + " = " +
              reduce_identity(*n->reduce, dt) + ";");
      if (n->reduce == ReduceKind::ArgMax || n->reduce == ReduceKind::ArgMin)
        w_.line("i64 acc_" + n->buffer + "_i = 0;");
    }
    const std::vector<VectorAccess>& vectors = row.pass_vectors[bi];
    if (vectors.empty()) {
      scalar_row_loop(row, blk);
    } else if (row.mode() == RowMode::per_group) {
      // The unrolled passes read the cached inputs from registers; the loop below, memory.
      std::vector<VectorAccess> in_registers = vectors;
      for (VectorAccess& a : in_registers)
        for (const VectorAccess& c : row.cached)
          if (!a.store && a.same_element(c)) a.cache = c.cache;
      {
        auto vector_path = w_.block("if (coil_fast)");
        auto runs = unrolled_runs(row.launch, row.r_numel);
        vector_lanes(
            {in_registers, row.r, {}, row.launch.width},
            [&](CudaEmitter& em, const Lanes& lanes) { fold_pass(em, blk.section, &lanes); });
      }
      auto other_path = w_.block("else");
      // A row of the length the runs were made for is here only when misaligned.
      if (row.r_numel->is_const())
        scalar_row_loop(row, blk);
      else
        vector_row_loop(row, blk, vectors);
    } else {
      vector_row_loop(row, blk, vectors);
    }
    for (const KernelNode* n : blk.section)
      if (n->reduce) finish_reduction(row, *n);
  }

  // The thread's elements of the row one at a time.
  void scalar_row_loop(const Row& row, const codegen::RowBlock& blk) {
    const std::string& rn = row.rn;
    std::string head;
    switch (row.mode()) {
      case RowMode::per_thread:
        head = "for (i64 r = 0; r < " + rn + "; ++r)";
        break;
      case RowMode::per_warp:
        head = "for (i64 r = coil_lane; r < " + rn + "; r += 32)";
        break;
      case RowMode::per_group:
        head = "for (i64 r = coil_t; r < " + rn + "; r += " + row.group() + ")";
        break;
      case RowMode::columns:
        head = "for (i64 r = threadIdx.x >> 5; r < " + rn +
               "; r += " + std::to_string(kColumnParts) + ")";
        break;
      case RowMode::per_block:
        head = "for (i64 r = threadIdx.x; r < " + rn +
               "; r += " + std::to_string(row.launch.block) + ")";
        break;
    }
    auto live = w_.block(row.mode() == RowMode::columns ? "if (coil_live)" : "");
    auto loop = w_.block(head);
    CudaEmitter em = emitter();
    fold_pass(em, blk.section, nullptr);
  }

  // The row launch.width at a time where its length divides and the vectors are aligned,
  // looping over it; else one at a time.
  void vector_row_loop(const Row& row, const codegen::RowBlock& blk,
                       const std::vector<VectorAccess>& vectors) {
    const int64_t width = row.launch.width;
    const std::string v = std::to_string(width);
    std::string fast = "(" + row.rn + ") % " + v + " == 0";
    for (const VectorAccess& a : vectors) fast += " && " + a.aligned();
    {
      auto vector_path = w_.block("if (" + fast + ")");
      const RowMode mode = row.mode();
      const int64_t threads = mode == RowMode::per_warp    ? 32
                              : mode == RowMode::per_group ? row.launch.group
                                                           : row.launch.block;
      const std::string thread = mode == RowMode::per_warp    ? "coil_lane"
                                 : mode == RowMode::per_group ? "coil_t"
                                                              : "threadIdx.x";
      auto loop = w_.block("for (i64 coil_base = (i64)" + thread + " * " + v + "; coil_base < " +
                           row.rn + "; coil_base += " + std::to_string(threads * width) + ")");
      vector_lanes({vectors, row.r, {}, width}, [&](CudaEmitter& em, const Lanes& lanes) {
        fold_pass(em, blk.section, &lanes);
      });
    }
    auto scalar_path = w_.block("else");
    scalar_row_loop(row, blk);
  }

  // A reduction's thread-local accumulator combined across the row's threads (red_NAME), and
  // stored by the row's first thread.
  void finish_reduction(Row& row, const KernelNode& n) {
    const DType dt = n.body->dtype();
    const std::string a = "acc_" + n.buffer, red = "red_" + n.buffer;
    if (n.reduce == ReduceKind::ArgMax || n.reduce == ReduceKind::ArgMin) {
      if (row.mode() != RowMode::per_thread)
        w_.line(std::string("coil_block_arg<") +
                (n.reduce == ReduceKind::ArgMax ? "true" : "false") + ">(" + a + ", " + a +
                "_i, coil_smem);");
      w_.line("const i64 " + red + " = " + a + "_i;");
    } else {
      const std::string type = codegen::compute_type(dt);
      w_.line("const " + type + " " + red + " = " + combined(row, n, a, type) + ";");
    }
    outer_[n.buffer] = red;
    if (n.store) {
      CudaEmitter em = emitter();
      em.line(row.first_thread + n.buffer + "[" + em.index(n.store_index) +
              "] = " + to_memory(n.dtype, red) + ";");
    }
  }

  // The expression combining accumulator `a` of reduction n across the row's threads.
  std::string combined(Row& row, const KernelNode& n, const std::string& a,
                       const std::string& type) {
    const std::string fold = reduce_fold(*n.reduce);
    switch (row.mode()) {
      case RowMode::per_thread:
        return a;
      case RowMode::per_warp:
        return "coil_warp_all_reduce(" + a + ", " + fold + ")";
      case RowMode::per_group: {
        const std::string part = "(" + type + "*)(coil_smem + " +
                                 std::to_string(row.reduction++ * row.launch.block / 32) + ")";
        if (row.launch.group == 32) return "coil_warp_all_reduce(" + a + ", " + fold + ")";
        return "coil_group_all_reduce<" + row.group() + ">(" + a + ", " + fold + ", " + part + ")";
      }
      case RowMode::columns:
        return "coil_column_reduce(" + a + ", " + fold + ", coil_smem)";
      case RowMode::per_block:
        break;
    }
    return "coil_block_reduce(" + a + ", " + fold + ", (" + type + ")" +
           reduce_identity(*n.reduce, n.body->dtype()) + ", coil_smem)";
  }

  // A per_group pass over the thread's runs of the row, unrolled: run coil_k from coil_base on;
  // for a row of run-time length, the runs before its end (the same in every thread of the
  // row); for a ragged one, the thread's runs before its end.
  CodeWriter::Scope unrolled_runs(const RowLaunch& launch, sym::Expr length) {
    w_.line("#pragma unroll");
    std::string head =
        "for (int coil_k = 0; coil_k < " + std::to_string(launch.vectors) + "; ++coil_k)";
    if (!length->is_const())
      head += " if ((i64)coil_k * " + std::to_string(launch.group * launch.width) + " < " +
              sym::to_c(length) + ")";
    else if (launch.ragged)
      head += " if (((i64)coil_k * " + std::to_string(launch.group) + " + coil_t) * " +
              std::to_string(launch.width) + " < " + sym::to_c(length) + ")";
    CodeWriter::Scope runs = w_.block(head);
    w_.line("const i64 coil_base = ((i64)coil_k * " + std::to_string(launch.group) +
            " + coil_t) * " + std::to_string(launch.width) + ";");
    return runs;
  }

  static const VectorAccess* find(const Lanes& lanes, const std::string& buffer, sym::Expr index) {
    for (const VectorAccess& a : lanes.vectors)
      if (a.buffer == buffer && index - lanes.var == a.offset) return &a;
    return nullptr;
  }

  std::vector<VectorAccess> vector_accesses(const std::vector<const KernelNode*>& nodes,
                                            sym::Expr var, int64_t width) const {
    return cuda::vector_accesses(
        nodes, var, [&](const std::string& b) { return nodes_.count(b); }, width);
  }

  // A run-time divisor's divider, named by its place in the kernel's list.
  std::string divider(sym::Expr d) {
    auto it = std::find(divisors_.begin(), divisors_.end(), d);
    if (it == divisors_.end()) it = divisors_.insert(divisors_.end(), d);
    return divider_name(static_cast<size_t>(it - divisors_.begin()));
  }

  const Kernel& k_;
  const ir::Program& p_;
  KernelSource& src_;
  int64_t pointwise_block_;
  std::vector<sym::Expr> divisors_;  // the run-time divisors of its indices, in first-use order
  CodeWriter w_{1};
  int counter_ = 0;
  std::map<std::string, const KernelNode*> nodes_;
  std::map<std::string, std::string> outer_;
  std::deque<Kernel> bound_;  // the kernels nodes_ points into (a deque: they never move)
  // The kernel's final reads that no write of it may alias; which of them each pass of a row
  // kernel streams, and the pass being printed.
  std::set<std::string> streamable_;
  StreamedReads streamed_;
  size_t pass_ = 0;
};

}  // namespace

Kernel with_two_pass_variances(const Kernel& k) {
  return codegen::two_pass_variances(
      k, [](const KernelNode& n, const Kernel&) { return n.reduce == ReduceKind::WelfordM2; });
}

KernelSource generate_kernel(const Kernel& k, const ir::Program& program,
                             const LaunchChoice& choice) {
  KernelSource src;
  src.name = k.name;
  src.parallel = true;
  std::vector<Kernel> parts = k.parts.empty() ? std::vector<Kernel>{k} : k.parts;
  const bool rows = k.parts.empty() && k.is_reduction();
  Kernel rewritten = rows ? with_two_pass_variances(k) : k;
  int64_t block = choice.pointwise_block ? choice.pointwise_block : kPointwiseBlock;
  // A read that a write may alias keeps to plain loads: the hinted one is an asm statement,
  // which the compiler may move past the write.
  std::set<std::string> streamable;
  if (rows) {
    std::map<const KernelNode*, size_t> pass_of;
    std::vector<codegen::RowBlock> bs = codegen::row_blocks(rewritten);
    for (size_t b = 0; b < bs.size(); ++b)
      for (const KernelNode* n : bs[b].section) pass_of[n] = b;
    src.inplace = codegen::inplace_pairs(rewritten, program, pass_of);
    streamable = k.final_reads;
    for (const auto& [w, r] : src.inplace) streamable.erase(r);
  } else if (k.parts.empty()) {
    src.inplace = codegen::inplace_pairs(k, program, {});
  } else {
    src.inplace = codegen::combo_inplace_pairs(k, program);
  }
  Printer pr(rewritten, program, src, block, std::move(streamable));
  if (rows) {
    const RowLaunch launch = choice.rows ? *choice.rows : row_launch(rewritten, program);
    block = launch.block;
    pr.row_body(rewritten, launch);
    src.launch = {launch.grid, block, 0};
  } else {
    sym::Expr blocks = sym::constant(0);
    for (const Kernel& part : parts) {
      const Printer::Pointwise pw = pr.pointwise(part);
      auto scope = pr.writer().block(parts.size() == 1 ? std::string()
                                                       : "if (blockIdx.x >= " + sym::to_c(blocks) +
                                                             " && blockIdx.x < " +
                                                             sym::to_c(blocks + pw.blocks) + ")");
      pr.pointwise_body(pw, blocks);
      blocks = blocks + pw.blocks;
    }
    src.launch = {blocks, block, 0};
  }
  std::set<std::string> written;
  std::set<std::string> seen;
  for (const Kernel& part : rows ? std::vector<Kernel>{rewritten} : parts) {
    for (const std::string& a : codegen::arguments(part))
      if (seen.insert(a).second) src.args.push_back(a);
    for (const std::string& w : codegen::written(part)) written.insert(w);
  }
  std::set<std::string> aliased;
  for (const auto& [w, r] : src.inplace) aliased.insert({w, r});
  src.symbols = codegen::kernel_symbols(k);
  src.divisors = pr.divisors();
  src.code = head(k.name, src.args, written, program, aliased, !src.index_checks.empty(),
                  src.symbols, src.divisors, block) +
             " {\n  coil_wait_previous_kernel();\n" + pr.writer().text() + "}\n";
  return src;
}

}  // namespace coil::cuda
