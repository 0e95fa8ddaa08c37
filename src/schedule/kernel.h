// The scheduler's output: kernels (fused loop nests over computed buffers) and the order in
// which kernels and extern calls run (Inductor's Scheduler nodes and FusedSchedulerNode).
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/program.h"

namespace coil::schedule {

// One statement of a kernel: a computed buffer re-indexed over the kernel's loop variables.
struct KernelNode {
  std::string buffer;
  // Whether it runs inside the kernel's inner (reduction) loops: every reduction, and the
  // pointwise nodes whose iteration space is outer x inner. Others run once per outer point.
  bool inner = false;
  std::optional<ir::ReduceKind> reduce;
  ir::Value body;         // over the kernel's variables
  sym::Expr store_index;  // element offset in the buffer, over the kernel's variables
  DType dtype{};          // of the stored elements
  // Written to memory: read after this kernel, or a graph output. Otherwise the value only
  // lives in registers inside the kernel.
  bool store = true;
};

// How many statements a kernel takes before it stops taking work that does not read it (an
// unrelated node of the same size, a combo's next part): a generated function's compile time
// grows faster than its length, and an optimizer's step over a whole model would otherwise
// become one function of thousands of statements. Chains that read the kernel's values still
// join it, so no intermediate is stored because of this bound.
constexpr size_t kMaxUnrelatedFusionNodes = 128;

struct Kernel {
  std::string name;  // fused_name's: what it computes
  // The ops of the graph nodes it computes, each once, in the order it computes them.
  std::vector<std::string> ops;
  SymShape outer;  // loop sizes, outermost first (expressions of the size symbols)
  SymShape inner;  // reduction loop sizes (empty for a pointwise kernel)
  std::vector<sym::Expr> outer_vars, inner_vars;
  std::vector<KernelNode> nodes;
  // A combo kernel (horizontal fusion): independent pointwise loop nests that run in one
  // parallel region, each a kernel of its own; `nodes` then holds every part's nodes and
  // `outer` the parts' total points.
  std::vector<Kernel> parts;
  // The buffers it reads that no later step reads and the graph does not return: a GPU kernel
  // reads those so that the L2 cache evicts them first (Inductor's evict_first for a buffer's
  // last use in a reduction).
  std::set<std::string> final_reads;
  bool is_reduction() const;
};

// One step of the compiled graph: a kernel, or the extern call that fills `buffer`.
struct Step {
  int kernel = -1;     // index into Schedule::kernels, or -1
  std::string buffer;  // for an extern step
};

// One fusion decision with its reason, as the `fusion` log prints it (str()): where a buffer
// went — fused into a kernel, kept out of one, a new kernel of its own — or which kernels
// horizontal fusion combined into a combo, or kept out of one.
struct FusionDecision {
  enum class Kind : uint8_t { fuse, do_not_fuse, new_kernel, combine, do_not_combine };
  Kind kind;
  std::string subject;  // the buffer placed; the kernels combined; the kernel kept out of a combo
  std::string kernel;   // the kernel decided about: fused into, new, the combo, the combo's first
  std::string reason;
  std::string str() const;
};

struct Schedule {
  std::vector<Kernel> kernels;
  std::vector<Step> steps;
  std::vector<FusionDecision> decisions;  // every fusion decision, in the order made
};

// A kernel's name says what it computes, as Inductor's do: its kind ("poi" pointwise, "red"
// reduction, "combo"), its first kMaxNameOps ops, and a number that keeps it unique:
// poi_fused_cos_mul_sin_add_0. Profiles and logs name kernels by it.
constexpr size_t kMaxNameOps = 8;
std::string fused_name(const std::string& kind, const std::vector<std::string>& ops, int number);

std::string to_string(const Kernel& k);

}  // namespace coil::schedule
