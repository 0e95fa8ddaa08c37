// Row kernels' bodies: a Printer that also prints a reduction kernel a row (or a group, a warp,
// a thread, or a column of 32 rows) at a time, in the launch row_modes.h chose.
#pragma once

#include "backends/cuda/kernel_printer.h"
#include "backends/cuda/row_modes.h"
#include "codegen/kernel_rewrites.h"

namespace coil::cuda::kernel_printing {

class RowPrinter : public Printer {
 public:
  using Printer::Printer;

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
};

}  // namespace coil::cuda::kernel_printing
