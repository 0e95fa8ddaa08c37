// The printer of one generated CUDA kernel's body (cuda_kernel.cpp's generate_kernel drives it):
// values emitted through CudaEmitter, pointwise kernels with their vector accesses, and the lanes
// and passes that row kernels (row_printer.h) build on.
#pragma once

#include <deque>
#include <map>
#include <set>

#include "backends/cuda/cuda_expr.h"
#include "backends/cuda/cuda_kernel.h"
#include "backends/cuda/streamed_reads.h"
#include "backends/cuda/vector_access.h"
#include "codegen/code_writer.h"

namespace coil::cuda::kernel_printing {

using codegen::CodeWriter;
using codegen::KernelSource;
using ir::ReduceKind;
using schedule::Kernel;
using schedule::KernelNode;

// The kernel parameter holding the divider of its k-th run-time divisor.
inline std::string divider_name(size_t k) { return "coil_dv" + std::to_string(k); }

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
      const sym::Expr first = sym::index_var("coil_base", lanes.var->range().hi + 1);
      // Whether `index` is the same for the run's elements (known, or checked on the way in).
      auto uniform = [&](sym::Expr index) {
        const std::optional<std::string> c = run_uniform(index, lanes.var, lanes.width);
        return c && (c->empty() || std::find(lanes.checked.begin(), lanes.checked.end(), *c) !=
                                       lanes.checked.end());
      };
      em.run_index = [&](sym::Expr index) {
        return sym::depends_on(index, lanes.var) && uniform(index)
                   ? sym::substitute(index, {{lanes.var, first}})
                   : index;
      };
      em.load_override = [&](const ir::ValueNode& load) -> std::optional<std::string> {
        if (const VectorAccess* a = find(lanes, load.buffer(), load.index()))
          return a->store ? std::nullopt
                          : std::optional(from_memory(load.dtype(), a->name + ".v[coil_j]"));
        // The same element for the run's elements (a channel's parameter read by flat index,
        // (i % (C*HW)) // HW with HW a multiple of the width, known or checked): read at the
        // run's first element, so that the run's reads, and what is computed from them alone, are
        // one (the compiler merges the unrolled copies) instead of a division chain each.
        if (load.is_indirect() || nodes_.count(load.buffer()) ||
            !sym::depends_on(load.index(), lanes.var) || !uniform(load.index()))
          return std::nullopt;
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

  CodeWriter& writer() { return w_; }
  const std::vector<sym::Expr>& divisors() const { return divisors_; }

 protected:
  static const VectorAccess* find(const Lanes& lanes, const std::string& buffer, sym::Expr index) {
    const std::optional<sym::Expr> offset = unit_offset(index, lanes.var, lanes.width, true);
    for (const VectorAccess& a : lanes.vectors)
      if (a.buffer == buffer && offset == a.offset) return &a;
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

}  // namespace coil::cuda::kernel_printing
