// The row strategy for reductions over the inner loops: for each outer point (a row), passes
// over the row, each folding its reductions into vector accumulators, with the nodes that run
// once per row between them. Softmax is three passes (maximum, sum of exponentials, output),
// layer norm two or three (sums, then the output; a variance's squared deviations between).
#include "backends/cpu/cpp_accumulator.h"
#include "backends/cpu/cpp_kernel_common.h"
#include "codegen/kernel_rewrites.h"

namespace coil::cpu {

using codegen::row_blocks;
using codegen::RowBlock;
using codegen::two_pass_variances;

namespace {

using ir::ReduceKind;

// A variance in two passes (the row's mean, then the squared deviations from it) rather than
// by Welford's update (a division per step, in a dependent chain): when the row is a vector
// kernel's, fits in L1 for the second pass (kMaxScratch), and is read rather than computed (a
// second pass recomputes the body).
bool two_pass_variance(const KernelNode& n, const Kernel& k, const ir::Program& p) {
  if (n.reduce != ReduceKind::WelfordM2) return false;
  const ir::Value& b = n.body;
  const bool read =
      b->op() == ir::Op::Load || (b->op() == ir::Op::Cast && b->args()[0]->op() == ir::Op::Load);
  return p.hint(sym_numel(k.inner)) <= kMaxScratch && read;
}

class RowKernel : public LoopEmitter {
 public:
  // `k` is the kernel after its rewrites: the row kernel keeps it alive.
  RowKernel(std::unique_ptr<Kernel> k, const ir::Program& p,
            std::vector<codegen::IndexCheck>* checks, bool vector)
      : LoopEmitter(*k, p, false, checks), owned_(std::move(k)) {
    lane_ = k_.inner_vars.back();
    vector_ = vector;
  }

  void body(CodeWriter& w) override {
    const sym::Expr rows = sym_numel(k_.outer);
    decide_parallel(
        {{rows * sym_numel(k_.inner), sym::constant(kParallelMin)}, {rows, sym::constant(2)}});
    if (sym_numel(k_.outer)->is_const(0)) return;
    std::vector<RowBlock> bs = row_blocks(k_);
    plan_scratch(bs);
    const size_t depth = k_.outer.size();
    if (parallel_) w.line(omp_for(static_cast<int>(depth)));
    auto loops = outer_loops(w, depth);
    const sym::Expr length = sym_numel(k_.inner);
    if (scratch_.empty() || length->is_const()) {
      emit_row(w, bs, length);
      return;
    }
    // A row whose length is known only at run time keeps its scratch arrays, sized for the
    // longest row they serve, when it is that short; a longer one recomputes.
    const std::string most = std::to_string(kMaxScratch);
    {
      auto kept = w.block("if (" + sym::to_c(length) + " <= " + most + ")");
      emit_row(w, bs, sym::constant(kMaxScratch));
    }
    scratch_.clear();
    scratch_owner_.clear();
    pass_ = 0;
    prefetched_ = false;
    auto recomputed = w.block("else");
    emit_row(w, bs, length);
  }

  std::vector<std::pair<std::string, std::string>> inplace_pairs() const override {
    std::map<const KernelNode*, size_t> pass_of;
    std::vector<RowBlock> bs = row_blocks(k_);
    for (size_t b = 0; b < bs.size(); ++b)
      for (const KernelNode* n : bs[b].section) pass_of[n] = b;
    return codegen::inplace_pairs(k_, p_, pass_of);
  }

 private:
  void configure(BodyEmitter& em) override {
    if (scratch_.empty()) return;
    const std::string row = sym::to_c(ir::ravel(k_.inner_vars, k_.inner));
    for (const auto& [key, name] : scratch_)
      em.keep(key, name, row, scratch_owner_.at(key) == current_block_);
  }

  void point_prologue(BodyEmitter& em, bool vector) override {
    if (!vector) return;
    for (const auto& [buffer, index] : prefetch_)
      em.line("__builtin_prefetch(" + buffer + " + " + sym::to_c(index) + ");");
  }

  // One row: its scratch arrays (of `scratch_length` floats), then its passes and the values
  // between them.
  void emit_row(CodeWriter& w, const std::vector<RowBlock>& bs, sym::Expr scratch_length) {
    for (const auto& [key, name] : scratch_)
      w.line("float " + name + "[" + sym::to_c(scratch_length) + "];");
    for (size_t b = 0; b < bs.size(); ++b) {
      current_block_ = b;
      if (!bs[b].outer) {
        emit_pass(w, bs[b].section);
        continue;
      }
      const KernelNode& n = *bs[b].outer;
      BodyEmitter em = emitter(w, false);
      Emitted v = em.emit(n.body);
      if (n.store) em.line(store_stmt(n, sym::to_c(n.store_index), v.text));
      outer_values_[n.buffer] = v;
    }
  }

  // How many vector accumulators each reduction of a pass keeps. One accumulator makes every
  // vector step wait for the last: a float add's latency, or a NaN-propagating max's compare
  // and select (docs/performance.md measures softmax's rows with four for the maximum and two
  // for the sum). Reductions of cheap values take four; of a transcendental's, two (its
  // arithmetic hides the add's latency). Only plain vector accumulators split, in loops of
  // kSplitMinTrip steps or more; the parts are merged before the final value, so a sum's
  // rounding order changes as it already does across the vector's lanes.
  static constexpr int64_t kSplitMinTrip = 128;
  int split_accumulators(const std::vector<const KernelNode*>& section) const {
    if (!vector_ || hint(k_.inner.back()) < kSplitMinTrip) return 1;
    bool any = false;
    for (const KernelNode* n : section) {
      if (!n->reduce) continue;
      if (!Accumulator::splittable(*n->reduce)) return 1;
      any = true;
    }
    return any ? (computes_transcendentals(section) ? 2 : 4) : 1;
  }

  // A row kernel's later passes read their row from cache; while one computes transcendentals
  // there (softmax's exp, gelu's erf) no load misses, so the hardware prefetcher does not run
  // ahead and the next row's first pass waits on memory. That pass instead prefetches the
  // next row's lines of each input it reads along the row (one prefetch per vector step: a
  // line with AVX-512; bench/probes/row_passes.cpp measures it). Only for rows of at least
  // kPrefetchRowBytes, whose passes are long, and for the first such pass.
  static constexpr int64_t kPrefetchRowBytes = 1024;
  void plan_prefetch(CodeWriter& w, const std::vector<const KernelNode*>& section) {
    if (!vector_ || pass_ < 2 || prefetched_ || k_.outer.empty() || hint(k_.outer.back()) < 2 ||
        hint_numel(k_.inner) * 4 < kPrefetchRowBytes)
      return;
    if (!computes_transcendentals(section)) return;
    const sym::Expr row = k_.outer_vars.back();
    const std::string next = sym::to_string(row) + "_next";
    const sym::Expr next_var = sym::index_var(next, k_.outer.back());
    std::set<std::string> seen;
    for (const KernelNode* n : section)
      ir::for_each_load(n->body, [&](const ir::ValueNode& l) {
        int64_t stride = 0;
        if (nodes_.count(l.buffer()) || !sym::depends_on(l.index(), row) ||
            !sym::constant_stride(l.index(), lane_, &stride) || stride != 1 ||
            !seen.insert(l.buffer()).second)
          return;  // made in this kernel, the same for every row, or not along the row
        prefetch_.push_back({l.buffer(), sym::substitute(l.index(), {{row, next_var}})});
      });
    if (prefetch_.empty()) return;
    prefetched_ = true;
    const std::string last = sym::to_c(k_.outer.back() - 1), r = sym::to_string(row);
    w.line("const i64 " + next + " = " + r + " < " + last + " ? " + r + " + 1 : " + r + ";");
  }

  // One pass of the inner loops over `section`, then the section's reductions' results.
  void emit_pass(CodeWriter& w, const std::vector<const KernelNode*>& section) {
    const int parts = split_accumulators(section);
    ++pass_;
    plan_prefetch(w, section);
    for (const KernelNode* n : section)
      if (n->reduce) Accumulator(k_, *n, vector_).declare(w, parts);
    {
      auto pass = w.block();
      std::vector<CodeWriter::Scope> loops;
      for (size_t d = 0; d + 1 < k_.inner.size(); ++d)
        loops.push_back(w.block(loop_head(k_.inner_vars[d], "0", sym::to_c(k_.inner[d]))));
      innermost(w, lane_, "0", sym::to_c(k_.inner.back()), section, parts);
    }
    prefetch_.clear();
    for (const KernelNode* n : section) {
      if (!n->reduce) continue;
      const Accumulator acc(k_, *n, vector_);
      acc.merge_parts(w, parts);
      const std::string var = "red_" + n->buffer;
      const bool arg = n->reduce == ReduceKind::ArgMax || n->reduce == ReduceKind::ArgMin;
      w.line(std::string(compute_type(arg ? kInt64 : n->body->dtype())) + " " + var + " = " +
             acc.final_value() + ";");
      if (n->store) w.line(store_stmt(*n, sym::to_c(n->store_index), var));
      outer_values_[n->buffer] = Emitted{var, false};
    }
  }

  // Transcendental values that a later pass over the same row computes again (softmax's exp:
  // once for the sum, once for the output) are kept in a row-sized array on the stack instead
  // (for rows up to kMaxScratch long).
  void plan_scratch(const std::vector<RowBlock>& bs) {
    // A stack array needs a size the compiler knows: a run-time length gets kMaxScratch's,
    // and the rows longer than that another version of the row that recomputes (body()).
    if (hint_numel(k_.inner) > kMaxScratch) return;
    std::map<std::string, size_t> first_section;
    for (size_t b = 0; b < bs.size(); ++b) {
      for (const KernelNode* n : bs[b].section) {
        ir::any_node(n->body, [&](const ir::ValueNode& v) {
          if (!is_expensive(v.op())) return false;
          std::string key = ir::to_string(v);
          auto [it, fresh] = first_section.emplace(key, b);
          if (!fresh && it->second != b && !scratch_.count(key))
            scratch_[key] = "scratch" + std::to_string(scratch_.size());
          return false;
        });
      }
    }
    for (auto& [key, name] : scratch_) scratch_owner_[key] = first_section.at(key);
  }

  std::unique_ptr<Kernel> owned_;
  std::map<std::string, std::string> scratch_;   // value (as text) -> its row array
  std::map<std::string, size_t> scratch_owner_;  // value -> the block that computes it
  size_t current_block_ = 0;
  int pass_ = 0;  // passes over the row emitted so far
  bool prefetched_ = false;
  std::vector<std::pair<std::string, sym::Expr>> prefetch_;  // buffer, next row's index
};

}  // namespace

Strategy row_kernel(const Kernel& k, const ir::Program& p,
                    std::vector<codegen::IndexCheck>* checks) {
  const bool vector = vectorizable(k, k.inner_vars.back());
  auto two_pass = [&p](const KernelNode& n, const Kernel& kk) {
    return two_pass_variance(n, kk, p);
  };
  auto rewritten = std::make_unique<Kernel>(vector ? two_pass_variances(k, two_pass) : k);
  return std::make_unique<RowKernel>(std::move(rewritten), p, checks, vector);
}

}  // namespace coil::cpu
