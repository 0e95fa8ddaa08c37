#include "backends/cpu/cpp_kernel.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>

#include <coil/error.h>

#include "backends/cpu/cpp_accumulator.h"
#include "backends/cpu/cpp_expr.h"
#include "runtime/tensor_impl.h"

namespace coil::cpu {

using codegen::KernelSource;

namespace {

using ir::ReduceKind;
using schedule::Kernel;
using schedule::KernelNode;

// Below this many points a kernel runs on one thread: waking the team costs more.
constexpr int64_t kParallelMin = 1 << 15;
// A single loop is cut into chunks of this many points for the threads to share.
constexpr int64_t kChunk = 1 << 13;
// Rows up to this many floats (32 KiB, about L1) may keep recomputed values in a stack array.
constexpr int64_t kMaxScratch = 1 << 13;

bool is_expensive(ir::Op op) {
  using ir::Op;
  switch (op) {
    case Op::Exp:
    case Op::SoftmaxExp:
    case Op::Exp2:
    case Op::Expm1:
    case Op::Log:
    case Op::Log2:
    case Op::Log1p:
    case Op::Sin:
    case Op::Cos:
    case Op::Tan:
    case Op::Tanh:
    case Op::Sigmoid:
    case Op::Erf:
    case Op::Pow:
    case Op::Atan2:
      return true;
    default:
      return false;
  }
}

std::string loop(sym::Expr var, const std::string& lo, const std::string& hi) {
  std::string v = sym::to_string(var);
  return "for (i64 " + v + " = " + lo + "; " + v + " < " + hi + "; ++" + v + ")";
}

std::string store_stmt(const KernelNode& n, const std::string& index, const std::string& value) {
  std::string at = n.buffer + "[" + index + "]";
  if (n.dtype == kBFloat16) return at + " = f2bf(" + value + ");";
  return at + " = (" + std::string(memory_type(n.dtype)) + ")(" + value + ");";
}

// The kernel function's head: each argument's pointer, const unless the kernel stores to it,
// and __restrict unless it may share memory with another (an in-place pair).
std::string function_head(const std::string& name, const std::vector<std::string>& args,
                          const std::set<std::string>& written, const ir::Program& p,
                          const std::vector<IndexCheck>& checks,
                          const std::vector<std::pair<std::string, std::string>>& inplace = {}) {
  std::set<std::string> aliased;
  for (const auto& [w, r] : inplace) aliased.insert({w, r});
  std::string head = "extern \"C\" void " + name + "(void* const* args) {\n";
  for (size_t i = 0; i < args.size(); ++i) {
    const bool w = written.count(args[i]) > 0;
    std::string type = memory_type(p.buffer(args[i]).layout.dtype);
    head += "  " + std::string(w ? "" : "const ") + type +
            (aliased.count(args[i]) ? "* " : "* __restrict ") + args[i] + " = (" +
            (w ? "" : "const ") + type + "*)args[" + std::to_string(i) + "];\n";
  }
  if (!checks.empty())
    head += "  i64* index_error = (i64*)args[" + std::to_string(args.size()) + "];\n";
  return head;
}

class KernelWriter {
 public:
  // `in_region`: the kernel is one part of a combo kernel, inside a parallel region its
  // function opens: its loops share out their iterations (omp for nowait) instead of forking.
  // `checks`: where the index checks go (a combo kernel's parts share one list).
  KernelWriter(const Kernel& k, const ir::Program& p, bool in_region = false,
               std::vector<IndexCheck>* checks = nullptr)
      : k_(k), p_(p), in_region_(in_region), checks_(checks ? checks : &own_checks_) {
    for (const KernelNode& n : k.nodes) nodes_[n.buffer] = &n;
  }

  KernelSource write() {
    KernelSource src;
    src.name = k_.name;
    src.code = body();
    src.vectorized = vector_;
    src.parallel = parallel_;
    src.args = arguments();
    src.inplace = inplace_pairs();
    src.index_checks = *checks_;
    src.code = function_head(k_.name, src.args, written(), p_, src.index_checks, src.inplace) +
               src.code + "}\n";
    return src;
  }

  // A buffer whose memory is the compiled graph's own and holds exactly its elements: computed
  // buffers, and the fresh contiguous results of library calls (not inputs, constants, or
  // extern views that alias them).
  static bool owned_dense(const ir::Buffer& b) {
    if (b.kind == ir::BufferKind::Computed) return true;
    return b.kind == ir::BufferKind::Extern && op_info(b.call->op).kind == OpKind::Extern &&
           b.layout.offset == 0 && b.layout.strides == contiguous_strides(b.layout.sizes);
  }

  // Stored buffers that may take over the memory of a buffer the kernel reads: every read of
  // it is at the element the stored node writes, and none comes after that node (later nodes
  // would see the new values). In a row kernel (reduction_kernel) the node is one of the
  // inner loops' stores: the row's earlier passes, which read the same elements, are done
  // before its pass starts, and each row is one thread's (softmax writes over its input, so
  // no fresh buffer is fetched into the cache to be overwritten). Not where a variance of the
  // same pass reads it: a two-pass variance's second pass follows the pass's stores.
  std::vector<std::pair<std::string, std::string>> inplace_pairs() const {
    std::vector<std::pair<std::string, std::string>> out;
    const bool rows = k_.is_reduction();
    if (rows && column_order()) return out;
    std::map<const KernelNode*, size_t> pass_of;
    if (rows) {
      std::vector<Block> bs = blocks();
      for (size_t b = 0; b < bs.size(); ++b)
        for (const KernelNode* n : bs[b].section) pass_of[n] = b;
    }
    std::set<std::string> taken;
    for (size_t i = 0; i < k_.nodes.size(); ++i) {
      const KernelNode& n = k_.nodes[i];
      if (!n.store || (rows && (!n.inner || n.reduce))) continue;
      const ir::Layout& wl = p_.buffer(n.buffer).layout;
      std::map<std::string, bool> same_element;  // read buffer -> every read fits so far
      for (size_t j = 0; j < k_.nodes.size(); ++j)
        ir::for_each_load(k_.nodes[j].body, [&](const ir::ValueNode& l) {
          if (nodes_.count(l.buffer())) return;  // made in this kernel
          const KernelNode& m = k_.nodes[j];
          const bool fits = j <= i && l.index() == n.store_index &&
                            !(m.reduce == ReduceKind::WelfordM2 && pass_of[&m] == pass_of[&n]);
          auto [it, fresh] = same_element.emplace(l.buffer(), fits);
          if (!fresh) it->second = it->second && fits;
        });
      for (const auto& [r, fits] : same_element) {
        const ir::Buffer& rb = p_.buffer(r);
        if (fits && !taken.count(r) && owned_dense(rb) && rb.layout.dtype == wl.dtype &&
            rb.layout.numel() == wl.numel()) {
          out.push_back({n.buffer, r});
          taken.insert(r);
          break;
        }
      }
    }
    return out;
  }

  bool vectorized() const { return vector_; }

  // The loop nest, without the function around it.
  std::string body() {
    lane_ = k_.is_reduction() ? k_.inner_vars.back() : k_.outer_vars.back();
    vector_ = can_vectorize();
    int64_t work = numel_of(k_.outer) * (k_.is_reduction() ? numel_of(k_.inner) : 1);
    parallel_ = in_region_ || (work >= kParallelMin && numel_of(k_.outer) > 1);
    if (numel_of(k_.outer) == 0) return "";
    if (column_order()) return column_kernel();
    return k_.is_reduction() ? reduction_kernel() : pointwise_kernel();
  }

  // Buffers the kernel stores to.
  std::set<std::string> written() const {
    std::set<std::string> out;
    for (const KernelNode& n : k_.nodes)
      if (n.store) out.insert(n.buffer);
    return out;
  }

  // Buffers read from memory or written, in first-use order.
  std::vector<std::string> arguments() const {
    std::vector<std::string> out;
    std::set<std::string> seen;
    auto add = [&](const std::string& b) {
      if (seen.insert(b).second) out.push_back(b);
    };
    for (const KernelNode& n : k_.nodes) {
      ir::for_each_load(n.body, [&](const ir::ValueNode& l) {
        auto it = nodes_.find(l.buffer());
        if (it == nodes_.end() || it->second->store) add(l.buffer());
      });
      if (n.store) add(n.buffer);
    }
    return out;
  }

  bool can_vectorize() const {
    for (const KernelNode& n : k_.nodes) {
      bool in_loop = n.inner || !k_.is_reduction();
      if (!in_loop) continue;
      if (!vectorizable(n.body, lane_)) return false;
      if (n.reduce) {
        if (*n.reduce == ReduceKind::ArgMax || *n.reduce == ReduceKind::ArgMin) return false;
        DType t = n.body->dtype();
        bool logical = *n.reduce == ReduceKind::Any || *n.reduce == ReduceKind::All;
        if (logical ? t != kBool : t != kFloat32) return false;
      } else if (n.store && n.dtype != kFloat32) {
        return false;
      }
    }
    return true;
  }

  std::optional<ir::Value> recompute(const std::string& buffer) const {
    auto it = nodes_.find(buffer);
    if (it == nodes_.end() || it->second->store || it->second->reduce) return std::nullopt;
    return it->second->body;
  }

  BodyEmitter emitter(std::string& out, const std::string& indent, bool vector) {
    BodyEmitter em(out, indent, vector ? lane_ : nullptr, counter_);
    for (const auto& [buffer, e] : outer_values_) em.forward(buffer, e);
    em.recompute = [this](const std::string& b) { return recompute(b); };
    em.checks = checks_;
    if (!scratch_.empty()) {
      std::string row = sym::to_c(ir::ravel(k_.inner_vars, k_.inner));
      for (const auto& [key, name] : scratch_)
        em.keep(key, name, row, scratch_owner_.at(key) == current_block_);
    }
    return em;
  }

  // The statements of `nodes` at one point (or COIL_VEC points) of the innermost loop.
  void point_body(std::string& out, const std::string& indent, bool vector,
                  const std::vector<const KernelNode*>& nodes) {
    BodyEmitter em = emitter(out, indent, vector);
    if (vector)
      for (const auto& [buffer, index] : prefetch_)
        em.line("__builtin_prefetch(" + buffer + " + " + sym::to_c(index) + ");");
    for (const KernelNode* n : nodes) {
      Emitted v = em.emit(n->body);
      if (n->reduce) {
        Accumulator(k_, *n, vector_).update(em, v, vector, acc_part_);
        continue;
      }
      em.forward(n->buffer, v);
      if (!n->store) continue;
      int64_t stride = 0;
      if (!vector || !sym::depends_on(n->store_index, lane_)) {
        em.line(store_stmt(*n, sym::to_c(n->store_index),
                           v.varying ? v.text + "[COIL_VEC - 1]" : v.text));
      } else if (sym::constant_stride(n->store_index, lane_, &stride) && stride == 1) {
        em.line("vstore(" + n->buffer + " + " + sym::to_c(n->store_index) + ", " +
                em.varying(v, kFloat32) + ");");
      } else {
        sym::Expr k = sym::var("k_", sym::Range{0, 15});
        sym::Expr at = sym::substitute(n->store_index, {{lane_, lane_ + k}});
        em.line("for (int k_ = 0; k_ < COIL_VEC; ++k_) " + n->buffer + "[" + sym::to_c(at) +
                "] = " + em.varying(v, kFloat32) + "[k_];");
      }
    }
  }

  // The innermost loop over `var` < size: vector steps, then the scalar remainder. With
  // `parts` > 1 (a pass of reductions, split_accumulators), a first loop takes `parts` vector
  // steps at a time, each into its own accumulators; each later step re-declares `var` in an
  // inner scope, so the body's indices need no rewriting.
  void innermost(std::string& out, const std::string& indent, sym::Expr var, const std::string& lo,
                 const std::string& hi, const std::vector<const KernelNode*>& nodes,
                 int parts = 1) {
    std::string v = sym::to_string(var);
    // GCC -O3 unrolls a loop of up to 16 constant steps completely, and then spends its time
    // in redundancy elimination over the copies: a softmax over 512-float rows (its maximum's
    // pass 8 steps of 4 vectors) compiled in 0.64 s instead of 0.10 s on the EPYC. A row
    // kernel's loops are vectorised and their accumulators split already; unrolled further
    // they gain nothing.
    const std::string keep = k_.is_reduction() ? indent + "#pragma GCC unroll 1\n" : "";
    if (!vector_) {
      out += keep + indent + loop(var, lo, hi) + " {\n";
      point_body(out, indent + "  ", false, nodes);
      out += indent + "}\n";
      return;
    }
    out += indent + "i64 " + v + " = " + lo + ";\n";
    if (parts > 1) {
      std::string step = std::to_string(parts) + " * COIL_VEC";
      out += keep + indent + "for (; " + v + " + " + step + " <= " + hi + "; " + v + " += " + step +
             ") {\n";
      point_body(out, indent + "  ", true, nodes);
      for (acc_part_ = 1; acc_part_ < parts; ++acc_part_) {
        std::string at = v + "_" + std::to_string(acc_part_);
        out += indent + "  {\n" + indent + "    const i64 " + at + " = " + v + " + " +
               std::to_string(acc_part_) + " * COIL_VEC;\n" + indent + "    const i64 " + v +
               " = " + at + ";\n";
        point_body(out, indent + "    ", true, nodes);
        out += indent + "  }\n";
      }
      acc_part_ = 0;
      out += indent + "}\n";
    }
    out += keep + indent + "for (; " + v + " + COIL_VEC <= " + hi + "; " + v + " += COIL_VEC) {\n";
    point_body(out, indent + "  ", true, nodes);
    out += indent + "}\n";
    out += keep + indent + "for (; " + v + " < " + hi + "; ++" + v + ") {\n";
    point_body(out, indent + "  ", false, nodes);
    out += indent + "}\n";
  }

  // The pragma that shares out the next `collapse` loops among the threads: its own parallel
  // region, or (a combo's part) the region already open, with no barrier after it.
  std::string omp_for(int collapse) const {
    std::string p = in_region_ ? "#pragma omp for schedule(static) nowait"
                               : "#pragma omp parallel for schedule(static)";
    return collapse > 1 ? p + " collapse(" + std::to_string(collapse) + ")" : p;
  }

  std::string pointwise_kernel() {
    std::vector<const KernelNode*> nodes;
    for (const KernelNode& n : k_.nodes) nodes.push_back(&n);
    std::string out;
    size_t depth = k_.outer.size();
    if (depth == 1 && parallel_) {
      // One long loop: chunks for the threads.
      std::string n = std::to_string(k_.outer[0]), c = std::to_string(kChunk);
      out += "  " + omp_for(1) + "\n";
      out += "  for (i64 chunk = 0; chunk < " + n + "; chunk += " + c + ") {\n";
      out += "    i64 end = chunk + " + c + " < " + n + " ? chunk + " + c + " : " + n + ";\n";
      innermost(out, "    ", lane_, "chunk", "end", nodes);
      out += "  }\n";
      return out;
    }
    std::string indent = "  ";
    if (parallel_ && depth > 1) out += indent + omp_for(static_cast<int>(depth) - 1) + "\n";
    for (size_t d = 0; d + 1 < depth; ++d) {
      out += indent + loop(k_.outer_vars[d], "0", std::to_string(k_.outer[d])) + "\n";
      indent += "  ";
    }
    out += indent.substr(2) + "{\n";
    innermost(out, indent, lane_, "0", std::to_string(k_.outer.back()), nodes);
    out += indent.substr(2) + "}\n";
    return out;
  }

  // ---- reductions: how many accumulators, and the next row prefetched ---------------------
  static bool computes_transcendentals(const std::vector<const KernelNode*>& section) {
    bool found = false;
    for (const KernelNode* n : section)
      ir::any_node(n->body, [&](const ir::ValueNode& v) { return found |= is_expensive(v.op()); });
    return found;
  }

  // How many vector accumulators each reduction of a pass keeps. One accumulator makes every
  // vector step wait for the last: a float add's latency, or a NaN-propagating max's compare,
  // or and select (softmax's arithmetic over 2048-float rows in L1, one EPYC core: 1.79 ->
  // 1.50 ms for 2048 rows with four for the maximum and two for the sum). Reductions of cheap
  // values take four; of a transcendental's, two (its arithmetic hides the add's latency).
  // Only plain vector accumulators split, in loops of kSplitMinTrip steps or more; the parts
  // are merged before the final value, so a sum's rounding order changes as it already does
  // across the vector's lanes.
  static constexpr int64_t kSplitMinTrip = 128;
  int split_accumulators(const std::vector<const KernelNode*>& section) const {
    if (!vector_ || k_.inner.back() < kSplitMinTrip) return 1;
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
  // line with AVX-512). On the 16-core Xeon a 2048-float softmax row went from 0.311-0.333 to
  // 0.263-0.285 ms (bench/probes/row_passes.cpp); on the 2-core EPYC it was level. Only for
  // rows of at least kPrefetchRowBytes, whose passes are long, and for the first such pass.
  static constexpr int64_t kPrefetchRowBytes = 1024;
  void plan_prefetch(std::string& out, const std::string& indent,
                     const std::vector<const KernelNode*>& section) {
    if (!vector_ || pass_ < 2 || prefetched_ || k_.outer.empty() || k_.outer.back() < 2 ||
        numel_of(k_.inner) * 4 < kPrefetchRowBytes)
      return;
    if (!computes_transcendentals(section)) return;
    const sym::Expr row = k_.outer_vars.back();
    const std::string next = sym::to_string(row) + "_next";
    const sym::Expr next_var = sym::var(next, sym::Range{0, k_.outer.back() - 1});
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
    const std::string last = std::to_string(k_.outer.back() - 1), r = sym::to_string(row);
    out +=
        indent + "const i64 " + next + " = " + r + " < " + last + " ? " + r + " + 1 : " + r + ";\n";
  }

  // Whether a variance over the inner loops is computed in two passes, the row's mean and then
  // the squared deviations from it, rather than by Welford's update (a division per step, in
  // a dependent chain): when the row is a vector kernel's, fits in L1 for the second pass
  // (kMaxScratch), and is read rather than computed (a second pass recomputes the body).
  bool two_pass_variance(const KernelNode& n) const {
    if (!vector_ || n.reduce != ReduceKind::WelfordM2) return false;
    int64_t numel = 1;
    for (int64_t s : k_.inner) numel *= s;
    const ir::Value& b = n.body;
    const bool read =
        b->op() == ir::Op::Load || (b->op() == ir::Op::Cast && b->args()[0]->op() == ir::Op::Load);
    return numel <= kMaxScratch && read;
  }

  // One pass of the inner loops over `section`, then the section's reductions' results; a
  // two-pass variance sums its row in this pass and its squared deviations in a second one.
  void emit_section(std::string& out, const std::string& indent,
                    const std::vector<const KernelNode*>& section) {
    std::vector<KernelNode> sums, squares;
    sums.reserve(section.size());
    squares.reserve(section.size());
    std::vector<const KernelNode*> first;
    std::map<std::string, std::string> sum_of;  // a two-pass variance's buffer -> its row sum's
    for (const KernelNode* n : section) {
      if (!two_pass_variance(*n)) {
        first.push_back(n);
        continue;
      }
      // The row's sum: a Sum of the same values in this section (layer norm's mean) or a new one.
      for (const KernelNode* m : section)
        if (m->reduce == ReduceKind::Sum && ir::to_string(m->body) == ir::to_string(n->body))
          sum_of[n->buffer] = m->buffer;
      if (!sum_of.count(n->buffer)) {
        KernelNode sum = *n;
        sum.buffer = sum_of[n->buffer] = n->buffer + "_sum";
        sum.reduce = ReduceKind::Sum;
        sum.store = false;
        first.push_back(&sums.emplace_back(std::move(sum)));
      }
      KernelNode square = *n;
      square.reduce = ReduceKind::Sum;
      ir::Value mean = ir::ValueNode::load(n->buffer + "_mean", n->body->dtype(), sym::constant(0));
      ir::Value d = ir::ValueNode::binary(ir::Op::Sub, n->body, mean);
      square.body = ir::ValueNode::binary(ir::Op::Mul, d, d);
      squares.push_back(std::move(square));
    }
    emit_pass(out, indent, first);
    if (squares.empty()) return;
    int64_t numel = 1;
    for (int64_t s : k_.inner) numel *= s;
    std::vector<const KernelNode*> second;
    for (const KernelNode& n : squares) {
      std::string mean = "mean_" + n.buffer;
      out += indent + compute_type(n.body->dtype()) + " " + mean + " = red_" + sum_of.at(n.buffer) +
             " / " + std::to_string(numel) + ";\n";
      outer_values_[n.buffer + "_mean"] = Emitted{mean, false};
      second.push_back(&n);
    }
    emit_pass(out, indent, second);
  }

  void emit_pass(std::string& out, const std::string& indent,
                 const std::vector<const KernelNode*>& section) {
    const int parts = split_accumulators(section);
    ++pass_;
    plan_prefetch(out, indent, section);
    for (const KernelNode* n : section)
      if (n->reduce) out += Accumulator(k_, *n, vector_).declare(indent, parts);
    std::string in = indent;
    out += indent + "{\n";
    for (size_t d = 0; d + 1 < k_.inner.size(); ++d) {
      out += in + "  " + loop(k_.inner_vars[d], "0", std::to_string(k_.inner[d])) + "\n";
      in += "  ";
    }
    out += in + "  {\n";
    innermost(out, in + "    ", lane_, "0", std::to_string(k_.inner.back()), section, parts);
    out += in + "  }\n";
    out += indent + "}\n";
    prefetch_.clear();
    for (const KernelNode* n : section) {
      if (!n->reduce) continue;
      const Accumulator acc(k_, *n, vector_);
      out += acc.merge_parts(indent, parts);
      std::string var = "red_" + n->buffer;
      out += indent +
             std::string(
                 compute_type(n->reduce == ReduceKind::ArgMax || n->reduce == ReduceKind::ArgMin
                                  ? kInt64
                                  : n->body->dtype())) +
             " " + var + " = " + acc.final_value() + ";\n";
      if (n->store) out += indent + store_stmt(*n, sym::to_c(n->store_index), var) + "\n";
      outer_values_[n->buffer] = Emitted{var, false};
    }
  }

  // The kernel's statements in order: passes of the inner loops ("sections", each ending where
  // a node needs a reduction computed in it) and, between them, nodes run once per outer point.
  struct Block {
    std::vector<const KernelNode*> section;  // empty for an outer node
    const KernelNode* outer = nullptr;
  };
  std::vector<Block> blocks() const {
    std::vector<Block> out;
    std::set<std::string> reduced_here;
    for (const KernelNode& n : k_.nodes) {
      bool needs_result = false;
      ir::for_each_load(n.body, [&](const ir::ValueNode& l) {
        needs_result |= reduced_here.count(l.buffer()) > 0;
      });
      if (!n.inner || needs_result || out.empty() || out.back().outer) {
        out.push_back(Block{});
        reduced_here.clear();
      }
      if (!n.inner) {
        out.back().outer = &n;
        continue;
      }
      out.back().section.push_back(&n);
      if (n.reduce) reduced_here.insert(n.buffer);
    }
    return out;
  }

  // Transcendental values that a later pass over the same row computes again (softmax's exp:
  // once for the sum, once for the output) are kept in a row-sized array on the stack instead.
  void plan_scratch(const std::vector<Block>& bs) {
    if (numel_of(k_.inner) > kMaxScratch) return;
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

  std::string reduction_kernel() {
    std::vector<Block> bs = blocks();
    plan_scratch(bs);
    std::string out, indent = "  ";
    size_t depth = k_.outer.size();
    if (parallel_)
      out += indent + "#pragma omp parallel for schedule(static)" +
             (depth > 1 ? " collapse(" + std::to_string(depth) + ")" : "") + "\n";
    for (size_t d = 0; d < depth; ++d) {
      out += indent + loop(k_.outer_vars[d], "0", std::to_string(k_.outer[d])) + "\n";
      indent += "  ";
    }
    out += indent.substr(2) + "{\n";
    for (const auto& [key, name] : scratch_)
      out += indent + "float " + name + "[" + std::to_string(numel_of(k_.inner)) + "];\n";
    for (size_t b = 0; b < bs.size(); ++b) {
      current_block_ = b;
      if (!bs[b].outer) {
        emit_section(out, indent, bs[b].section);
        continue;
      }
      const KernelNode& n = *bs[b].outer;
      BodyEmitter em = emitter(out, indent, false);
      Emitted v = em.emit(n.body);
      if (n.store) em.line(store_stmt(n, sym::to_c(n.store_index), v.text));
      outer_values_[n.buffer] = v;
    }
    out += indent.substr(2) + "}\n";
    return out;
  }

  // ---- reductions along an outer dim of memory -------------------------------------------
  // sum(x, 0) of a row-major x reads a column for each output: vectorising its reduction loop
  // would gather. When every access instead runs along the innermost output dim, the kernel
  // keeps a chunk of outputs in their buffer and folds in one reduction step at a time, with
  // vector loads along memory (the loop order that suits the layout, as Inductor reorders).
  // Welford's variance folds the same way: every output of a chunk has seen the same number
  // of steps, so its update runs across outputs with one shared 1/n, the running means in a
  // chunk-sized array beside the outputs.
  static constexpr int64_t kColumnChunk = 256;

  static bool column_foldable(ReduceKind k) { return fold_op(k) || k == ReduceKind::WelfordM2; }
  static std::optional<ir::Op> fold_op(ReduceKind k) {
    switch (k) {
      case ReduceKind::Sum:
        return ir::Op::Add;
      case ReduceKind::Prod:
        return ir::Op::Mul;
      case ReduceKind::Max:
        return ir::Op::Maximum;
      case ReduceKind::Min:
        return ir::Op::Minimum;
      default:
        return std::nullopt;  // Welford and arg-reductions carry more than one value
    }
  }

  bool column_order() const {
    if (!k_.is_reduction()) return false;
    sym::Expr xl = k_.outer_vars.back(), rl = k_.inner_vars.back();
    bool gathers = false, ok = true;
    auto unit = [](sym::Expr e, sym::Expr v) {
      int64_t s = 0;
      return sym::constant_stride(e, v, &s) && (s == 0 || s == 1);
    };
    for (const KernelNode& n : k_.nodes) {
      int64_t s = 0;
      if (!n.reduce || !n.store || !column_foldable(*n.reduce) || !is_floating(n.dtype) ||
          n.body->dtype() != n.dtype || !sym::constant_stride(n.store_index, xl, &s) || s != 1)
        return false;
      ir::for_each_load(n.body, [&](const ir::ValueNode& l) {
        // Column order would need the index values per output column: left to row order.
        ok = ok && !l.is_indirect() && !nodes_.count(l.buffer()) && unit(l.index(), xl);
        gathers = gathers || !unit(l.index(), rl);
      });
    }
    return ok && gathers;
  }

  std::string column_kernel() {
    using V = ir::ValueNode;
    std::vector<KernelNode> init, fold;
    const sym::Expr chunk_start = sym::var("chunk", sym::Range{0, k_.outer.back()});
    const sym::Expr in_chunk = k_.outer_vars.back() - chunk_start;
    std::vector<const KernelNode*> welfords;  // each keeps its running means in an array
    for (const KernelNode& n : k_.nodes) {
      if (*n.reduce == ReduceKind::WelfordM2) {
        // d = x - mean; mean += d / count; m2 += d * (x - mean), count = reduction step + 1.
        std::string mean = "wmean_" + n.buffer, delta = "wdelta_" + n.buffer;
        welfords.push_back(&n);
        ir::Value count = V::binary(
            ir::Op::Add, V::cast(V::index_value(ir::ravel(k_.inner_vars, k_.inner)), n.dtype),
            V::make_constant(1.0, n.dtype));
        KernelNode zero = n, zero_mean = n, d = n, step_mean = n, step_m2 = n;
        for (KernelNode* k : {&zero, &zero_mean, &d, &step_mean, &step_m2}) k->reduce.reset();
        zero.body = zero_mean.body = V::make_constant(0.0, n.dtype);
        zero_mean.buffer = step_mean.buffer = mean;
        zero_mean.store_index = step_mean.store_index = in_chunk;
        d.buffer = delta;
        d.store = false;
        d.body = V::binary(ir::Op::Sub, n.body, V::load(mean, n.dtype, in_chunk));
        step_mean.body =
            V::binary(ir::Op::Add, V::load(mean, n.dtype, in_chunk),
                      V::binary(ir::Op::Div, V::load(delta, n.dtype, in_chunk), count));
        step_m2.body =
            V::binary(ir::Op::Add, V::load(n.buffer, n.dtype, n.store_index),
                      V::binary(ir::Op::Mul, V::load(delta, n.dtype, in_chunk),
                                V::binary(ir::Op::Sub, n.body, V::load(mean, n.dtype, in_chunk))));
        init.insert(init.end(), {zero, zero_mean});
        fold.insert(fold.end(), {d, step_mean, step_m2});
        continue;
      }
      bool lowest = *n.reduce == ReduceKind::Max;
      double start = *n.reduce == ReduceKind::Sum    ? 0.0
                     : *n.reduce == ReduceKind::Prod ? 1.0
                                                     : (lowest ? -INFINITY : INFINITY);
      KernelNode first = n, step = n;
      first.reduce = step.reduce = std::nullopt;
      first.body = V::make_constant(start, n.dtype);
      step.body = V::binary(*fold_op(*n.reduce), V::load(n.buffer, n.dtype, n.store_index), n.body);
      init.push_back(first);
      fold.push_back(step);
    }
    std::vector<const KernelNode*> init_nodes, fold_nodes;
    for (const KernelNode& n : init) init_nodes.push_back(&n);
    for (const KernelNode& n : fold) fold_nodes.push_back(&n);
    lane_ = k_.outer_vars.back();
    vector_ = true;
    for (const KernelNode* n : fold_nodes)
      vector_ = vector_ && n->dtype == kFloat32 && vectorizable(n->body, lane_);
    const int64_t chunk = kColumnChunk, n_last = k_.outer.back();
    size_t depth = k_.outer.size();
    parallel_ = numel_of(k_.outer) * numel_of(k_.inner) >= kParallelMin &&
                numel_of(k_.outer) / std::min(chunk, n_last) > 1;
    std::string out, indent = "  ", n = std::to_string(n_last), c = std::to_string(chunk);
    if (parallel_)
      out += indent + "#pragma omp parallel for schedule(static) collapse(" +
             std::to_string(depth) + ")\n";
    for (size_t d = 0; d + 1 < depth; ++d) {
      out += indent + loop(k_.outer_vars[d], "0", std::to_string(k_.outer[d])) + "\n";
      indent += "  ";
    }
    out += indent + "for (i64 chunk = 0; chunk < " + n + "; chunk += " + c + ") {\n";
    std::string in = indent + "  ";
    out += in + "i64 end = chunk + " + c + " < " + n + " ? chunk + " + c + " : " + n + ";\n";
    for (const KernelNode* w : welfords)
      out += in + compute_type(w->dtype) + " wmean_" + w->buffer + "[" + c + "];\n";
    out += in + "{\n";
    innermost(out, in + "  ", lane_, "chunk", "end", init_nodes);
    out += in + "}\n";
    std::string r_in = in;
    for (size_t d = 0; d < k_.inner.size(); ++d) {
      out += r_in + loop(k_.inner_vars[d], "0", std::to_string(k_.inner[d])) + "\n";
      r_in += "  ";
    }
    out += r_in + "{\n";
    innermost(out, r_in + "  ", lane_, "chunk", "end", fold_nodes);
    out += r_in + "}\n";
    out += indent + "}\n";
    return out;
  }

  const Kernel& k_;
  const ir::Program& p_;
  std::map<std::string, const KernelNode*> nodes_;
  std::map<std::string, Emitted> outer_values_;
  std::map<std::string, std::string> scratch_;   // value (as text) -> its row array
  std::map<std::string, size_t> scratch_owner_;  // value -> the block that computes it
  size_t current_block_ = 0;
  sym::Expr lane_ = nullptr;
  bool vector_ = false;
  int acc_part_ = 0;  // which of a split reduction's accumulators the body updates
  int pass_ = 0;      // passes over the row emitted so far
  bool prefetched_ = false;
  std::vector<std::pair<std::string, sym::Expr>> prefetch_;  // buffer, next row's index
  bool parallel_ = false;
  bool in_region_ = false;
  int counter_ = 0;
  std::vector<IndexCheck> own_checks_;
  std::vector<IndexCheck>* checks_;
};

// A combo kernel: one parallel region, each part's loops shared out in turn without a barrier
// between them (the parts are independent).
KernelSource combo_kernel(const Kernel& k, const ir::Program& program) {
  KernelSource src;
  src.name = k.name;
  src.parallel = true;
  src.vectorized = true;
  std::set<std::string> written, seen;
  std::string bodies;
  for (const Kernel& part : k.parts) {
    KernelWriter w(part, program, /*in_region=*/true, &src.index_checks);
    std::string body = w.body();
    src.vectorized = src.vectorized && w.vectorized();
    for (const std::string& a : w.arguments())
      if (seen.insert(a).second) src.args.push_back(a);
    for (const std::string& b : w.written()) written.insert(b);
    bodies += "  {  // " + part.name + "\n" + body + "  }\n";
  }
  src.code = function_head(k.name, src.args, written, program, src.index_checks) +
             "#pragma omp parallel\n{\n" + bodies + "}\n}\n";
  return src;
}

}  // namespace

KernelSource generate_kernel(const Kernel& k, const ir::Program& program) {
  if (!k.parts.empty()) return combo_kernel(k, program);
  return KernelWriter(k, program).write();
}

}  // namespace coil::cpu
