// The column strategy, for reductions along an outer dim of memory: sum(x, 0) of a row-major x
// reads a column for each output, so vectorising its reduction loop would gather. When every
// access instead runs along the innermost output dim, the kernel keeps a chunk of outputs in
// their buffer and folds in one reduction step at a time, with vector loads along memory (the
// loop order that suits the layout, as Inductor reorders). Welford's variance folds the same
// way: every output of a chunk has seen the same number of steps, so its update runs across
// outputs with one shared 1/n, the running means in a chunk-sized array beside the outputs.
#include "backends/cpu/cpp_kernel_common.h"
#include "codegen/kernel_rewrites.h"

namespace coil::cpu {

using codegen::column_fold;
using codegen::column_foldable;
using codegen::ColumnFold;

namespace {

constexpr int64_t kColumnChunk = 256;

// Every reduction stores a floating value along the innermost output dim with unit stride,
// every load runs along it too (stride 0 or 1), and some load would gather along the
// reduction's innermost dim.
bool column_order(const Kernel& k) {
  if (!k.is_reduction()) return false;
  std::set<std::string> made;
  for (const KernelNode& n : k.nodes) made.insert(n.buffer);
  const sym::Expr xl = k.outer_vars.back(), rl = k.inner_vars.back();
  bool gathers = false, ok = true;
  auto unit = [](sym::Expr e, sym::Expr v) {
    int64_t s = 0;
    return sym::constant_stride(e, v, &s) && (s == 0 || s == 1);
  };
  for (const KernelNode& n : k.nodes) {
    int64_t s = 0;
    if (!n.reduce || !n.store || !column_foldable(*n.reduce) || !is_floating(n.dtype) ||
        n.body->dtype() != n.dtype || !sym::constant_stride(n.store_index, xl, &s) || s != 1)
      return false;
    ir::for_each_load(n.body, [&](const ir::ValueNode& l) {
      // Column order would need the index values per output column: left to row order.
      ok = ok && !l.is_indirect() && !made.count(l.buffer()) && unit(l.index(), xl);
      gathers = gathers || !unit(l.index(), rl);
    });
  }
  return ok && gathers;
}

class ColumnKernel : public LoopEmitter {
 public:
  ColumnKernel(const Kernel& k, const ir::Program& p, std::vector<codegen::IndexCheck>* checks)
      : LoopEmitter(k, p, false, checks),
        chunk_start_(sym::index_var("chunk", k.outer.back() + 1)),
        fold_(column_fold(k, chunk_start_)) {}

  void body(CodeWriter& w) override {
    std::vector<const KernelNode*> init, fold;
    for (const KernelNode& n : fold_.init) init.push_back(&n);
    for (const KernelNode& n : fold_.fold) fold.push_back(&n);
    lane_ = k_.outer_vars.back();
    vector_ = true;
    for (const KernelNode* n : fold)
      vector_ = vector_ && n->dtype == kFloat32 && cpu::vectorizable(n->body, lane_);
    // More than one chunk of outputs: outputs / chunk > 1.
    const sym::Expr outputs = sym_numel(k_.outer);
    decide_parallel({{outputs * sym_numel(k_.inner), sym::constant(kParallelMin)},
                     {outputs, 2 * sym::min(sym::constant(kColumnChunk), k_.outer.back())}});
    if (sym_numel(k_.outer)->is_const(0)) return;
    const size_t depth = k_.outer.size();
    const std::string n = sym::to_c(k_.outer.back()), c = std::to_string(kColumnChunk);
    if (parallel_)
      w.line("#pragma omp parallel for schedule(static) collapse(" + std::to_string(depth) + ")");
    auto loops = outer_loops(w, depth - 1);
    auto chunks = w.block("for (i64 chunk = 0; chunk < " + n + "; chunk += " + c + ")");
    w.line("i64 end = chunk + " + c + " < " + n + " ? chunk + " + c + " : " + n + ";");
    for (const auto& [mean, dtype] : fold_.welford_means)
      w.line(std::string(compute_type(dtype)) + " " + mean + "[" + c + "];");
    {
      auto first = w.block();
      innermost(w, lane_, "chunk", "end", init);
    }
    std::vector<CodeWriter::Scope> steps;
    for (size_t d = 0; d < k_.inner.size(); ++d)
      steps.push_back(w.block(loop_head(k_.inner_vars[d], "0", sym::to_c(k_.inner[d]))));
    innermost(w, lane_, "chunk", "end", fold);
  }

 private:
  sym::Expr chunk_start_;
  ColumnFold fold_;
};

}  // namespace

Strategy column_kernel(const Kernel& k, const ir::Program& p,
                       std::vector<codegen::IndexCheck>* checks) {
  if (!column_order(k)) return nullptr;
  return std::make_unique<ColumnKernel>(k, p, checks);
}

}  // namespace coil::cpu
