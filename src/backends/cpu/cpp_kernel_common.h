// What the CPU backend's three loop strategies share (pointwise_kernel.cpp, row_kernel.cpp,
// column_kernel.cpp): the kernel function's head and arguments, the body of one point of the
// innermost loop, and that loop itself in vector steps with a scalar remainder.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backends/cpu/cpp_expr.h"
#include "codegen/code_writer.h"
#include "codegen/kernel_args.h"
#include "codegen/kernel_source.h"
#include "ir/program.h"
#include "schedule/kernel.h"

namespace coil::cpu {

using codegen::arguments;
using codegen::CodeWriter;
using codegen::inplace_pairs;
using codegen::KernelSource;
using codegen::written;
using schedule::Kernel;
using schedule::KernelNode;

// Below this many points a kernel runs on one thread: waking the team costs more.
constexpr int64_t kParallelMin = 1 << 15;
// A single loop is cut into chunks of this many points for the threads to share.
constexpr int64_t kChunk = 1 << 13;
// Rows up to this many floats (32 KiB, about L1) may keep recomputed values in a stack array.
constexpr int64_t kMaxScratch = 1 << 13;

// Transcendentals: worth keeping in a row array rather than computing twice, and numerous
// enough in a pass to change how its accumulators split.
bool is_expensive(ir::Op op);
bool computes_transcendentals(const std::vector<const KernelNode*>& nodes);

// `for (i64 v = lo; v < hi; ++v)`
std::string loop_head(sym::Expr var, const std::string& lo, const std::string& hi);
std::string store_stmt(const KernelNode& n, const std::string& index, const std::string& value);

// Whether every value of the kernel's innermost loop (a reduction's inner loop) can run in
// vector steps along `lane`.
bool vectorizable(const Kernel& k, sym::Expr lane);

// The kernel function's head: each argument's pointer, const unless the kernel stores to it,
// and __restrict unless it may share memory with another (an in-place pair); then the size
// symbols the code reads (a dynamic graph's s0, s1, ...), from the array after the buffers.
std::string function_head(const std::string& name, const std::vector<std::string>& args,
                          const std::set<std::string>& written, const ir::Program& p,
                          const std::vector<codegen::IndexCheck>& checks,
                          const std::vector<sym::Expr>& symbols,
                          const std::vector<std::pair<std::string, std::string>>& inplace = {});

// The printer of one kernel's loop nest; each strategy derives from it.
class LoopEmitter {
 public:
  // `in_region`: the kernel is one part of a combo kernel, inside a parallel region its
  // function opens: its loops share out their iterations (omp for nowait) instead of forking.
  // `checks`: where the index checks go (a combo kernel's parts share one list).
  LoopEmitter(const Kernel& k, const ir::Program& p, bool in_region,
              std::vector<codegen::IndexCheck>* checks);
  virtual ~LoopEmitter() = default;
  LoopEmitter(const LoopEmitter&) = delete;
  LoopEmitter& operator=(const LoopEmitter&) = delete;

  // The loop nest, without the function around it.
  virtual void body(CodeWriter& w) = 0;
  // (written, read) pairs that may share memory (KernelSource::inplace).
  virtual std::vector<std::pair<std::string, std::string>> inplace_pairs() const { return {}; }

  const Kernel& kernel() const { return k_; }
  bool vectorized() const { return vector_; }
  bool parallel() const { return parallel_; }

 protected:
  // A size's value at the graph's hints: what the heuristics (threads, splits, scratch rows)
  // decide on. The code itself holds for every value.
  int64_t hint(sym::Expr e) const;
  int64_t hint_numel(const SymShape& s) const;
  // A body emitter for one point (or COIL_VEC points, `vector`) of the innermost loop.
  BodyEmitter emitter(CodeWriter& w, bool vector);
  // Strategies add what their bodies share (a row kernel's arrays of kept values), and what
  // each point of the innermost loop starts with (a row kernel's prefetches).
  virtual void configure(BodyEmitter& em) {}
  virtual void point_prologue(BodyEmitter& em, bool vector) {}
  // The statements of `nodes` at one point (or COIL_VEC points) of the innermost loop.
  void point_body(CodeWriter& w, bool vector, const std::vector<const KernelNode*>& nodes);
  // The innermost loop over `var` < hi: vector steps, then the scalar remainder. With `parts`
  // > 1 (a pass of reductions, split accumulators), a first loop takes `parts` vector steps at
  // a time, each into its own accumulators; each later step re-declares `var` in an inner
  // scope, so the body's indices need no rewriting.
  void innermost(CodeWriter& w, sym::Expr var, const std::string& lo, const std::string& hi,
                 const std::vector<const KernelNode*>& nodes, int parts = 1);
  // The pragma that shares out the next `collapse` loops among the threads: its own parallel
  // region, or (a combo's part) the region already open, with no barrier after it.
  std::string omp_for(int collapse) const;
  // Whether the loops run on the thread team: when every `lhs >= rhs` of `tests` holds. Static
  // sizes decide here; with sizes known only at run time the loops are parallel and the tests
  // the ranges leave open are the run-time condition (parallel_condition()), which the kernel
  // checks before them, running a serial copy when it fails.
  void decide_parallel(const std::vector<std::pair<sym::Expr, sym::Expr>>& tests);

 public:
  // The run-time condition of the loops' threads (C; empty when decided while compiling).
  const std::string& parallel_condition() const { return parallel_condition_; }
  // Emit the loops without threads whatever the sizes: the serial copy a kernel with a run-time
  // condition runs when it fails (an OpenMP region with a false if clause still costs a team).
  void run_serially() { serial_ = true; }

 protected:
  // The outer loops `0 .. depth - 1`, each a block of the previous one.
  std::vector<CodeWriter::Scope> outer_loops(CodeWriter& w, size_t depth);

  const Kernel& k_;
  const ir::Program& p_;
  std::map<std::string, const KernelNode*> nodes_;
  std::map<std::string, Emitted> outer_values_;  // values computed once per outer point
  sym::Expr lane_ = nullptr;
  bool vector_ = false;
  bool parallel_ = false;
  bool in_region_ = false;
  std::string parallel_condition_;  // see parallel_condition()
  bool serial_ = false;
  int acc_part_ = 0;  // which of a split reduction's accumulators the body updates
  int counter_ = 0;
  std::vector<codegen::IndexCheck>* checks_;
};

// The strategies (pointwise_kernel.cpp, row_kernel.cpp, column_kernel.cpp): each takes the
// kernel as the schedule made it and applies its own rewrites (kernel_rewrites.h) first.
using Strategy = std::unique_ptr<LoopEmitter>;
Strategy pointwise_kernel(const Kernel& k, const ir::Program& p, bool in_region,
                          std::vector<codegen::IndexCheck>* checks);
Strategy row_kernel(const Kernel& k, const ir::Program& p,
                    std::vector<codegen::IndexCheck>* checks);
// Null unless `k` reduces along an outer dim of memory and every access runs along the
// innermost output dim (column order suits the layout).
Strategy column_kernel(const Kernel& k, const ir::Program& p,
                       std::vector<codegen::IndexCheck>* checks);

}  // namespace coil::cpu
