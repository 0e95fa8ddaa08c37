// The pointwise strategy: the kernel's loop nest with the innermost loop in vector steps, the
// outer loops shared among the threads (one long loop is cut into chunks for them).
#include "backends/cpu/cpp_kernel_common.h"

namespace coil::cpu {

namespace {

class PointwiseKernel : public LoopEmitter {
 public:
  using LoopEmitter::LoopEmitter;

  void body(CodeWriter& w) override {
    lane_ = k_.outer_vars.back();
    vector_ = vectorizable(k_, lane_);
    const sym::Expr points = sym_numel(k_.outer);
    if (in_region_)
      parallel_ = true;
    else
      decide_parallel({{points, sym::constant(kParallelMin)}, {points, sym::constant(2)}});
    if (sym_numel(k_.outer)->is_const(0)) return;
    std::vector<const KernelNode*> nodes;
    for (const KernelNode& n : k_.nodes) nodes.push_back(&n);
    const size_t depth = k_.outer.size();
    if (depth == 1 && parallel_) {
      const std::string n = sym::to_c(k_.outer[0]), c = std::to_string(kChunk);
      w.line(omp_for(1));
      auto chunks = w.block("for (i64 chunk = 0; chunk < " + n + "; chunk += " + c + ")");
      w.line("i64 end = chunk + " + c + " < " + n + " ? chunk + " + c + " : " + n + ";");
      innermost(w, lane_, "chunk", "end", nodes);
      return;
    }
    if (parallel_ && depth > 1) w.line(omp_for(static_cast<int>(depth) - 1));
    auto loops = outer_loops(w, depth - 1);
    innermost(w, lane_, "0", sym::to_c(k_.outer.back()), nodes);
  }

  std::vector<std::pair<std::string, std::string>> inplace_pairs() const override {
    return codegen::inplace_pairs(k_, p_, {});
  }
};

}  // namespace

Strategy pointwise_kernel(const Kernel& k, const ir::Program& p, bool in_region,
                          std::vector<codegen::IndexCheck>* checks) {
  return std::make_unique<PointwiseKernel>(k, p, in_region, checks);
}

}  // namespace coil::cpu
