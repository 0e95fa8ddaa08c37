// The loop IR's containers: buffers with layouts, the computations that fill them (Pointwise
// and Reduction bodies over symbolic indices, as Inductor's ComputedBuffer), extern calls
// (library kernels and the eager fallbacks), and the lowered program that lists them in
// execution order. Lowering builds a Program; the scheduler groups its computed buffers into
// kernels; code generation prints them.
#pragma once

#include <optional>
#include <map>
#include <unordered_map>
#include <string>
#include <variant>
#include <vector>

#include <coil/tensor.h>

#include "graph/arg.h"
#include "graph/registry.h"
#include "ir/value.h"
#include "sym/shape.h"

namespace coil::ir {

// Where a buffer's elements live: element (i0, i1, ...) at offset + sum(ik * strides[k]).
// Sizes, strides and offset are expressions: numbers in a static graph, expressions over
// the graph's size symbols (s0, s1, ...) in a dynamic one, evaluated when the code runs.
struct Layout {
  DType dtype{};
  SymShape sizes;
  SymShape strides;
  sym::Expr offset = sym::constant(0);

  sym::Expr numel() const;
  // The element offset of `index` (one expression per dim).
  sym::Expr address(const std::vector<sym::Expr>& index) const;
  bool is_static() const;
  std::string str() const;  // "f32[8, 16][16, 1]+0"
  static Layout contiguous(DType dtype, SymShape sizes);
  static Layout of(DType dtype, const Shape& sizes, const Shape& strides, int64_t offset = 0);
  bool operator==(const Layout&) const = default;
};

enum class ReduceKind : uint8_t {
  Sum,
  Prod,
  Max,
  Min,
  ArgMax,  // the reduction index (int64) of the first maximum; NaN counts as the maximum
  ArgMin,
  WelfordM2,  // sum of squared deviations from the mean, by Welford's update
  Any,
  All,
};
const char* reduce_kind_name(ReduceKind k);

// One value per point of `ranges` (a Pointwise), or per point of `ranges` combined over
// `reduction_ranges` (a Reduction). `vars` and `rvars` are the index variables the body uses,
// one per range.
struct Computation {
  SymShape ranges;
  std::vector<sym::Expr> vars;
  SymShape reduction_ranges;
  std::vector<sym::Expr> rvars;
  Value body;
  std::optional<ReduceKind> reduce;
  DType dtype{};  // of the result (ArgMax/ArgMin: int64; WelfordM2: the body's dtype)

  bool is_reduction() const { return reduce.has_value(); }
};

// A strided view of a buffer: what extern calls receive and what a graph output returns.
struct TensorRef {
  std::string buffer;
  Layout view;
};

// A literal argument of an extern call, or a view of a buffer where the op takes a tensor.
using ExternArg = std::variant<Arg, TensorRef, std::vector<TensorRef>>;

struct ExternCall {
  OpId op{};
  std::vector<ExternArg> args;  // one per schema argument
  std::string reason;           // why this op runs a library/eager kernel: logs say it
  // Which of the op's results this buffer holds. A later result's buffer makes no call of its
  // own: it takes that result of the call its first result's buffer (`first`) made.
  int64_t result = 0;
  std::string first;
};
// The buffers an extern call reads, in argument order.
std::vector<std::string> extern_inputs(const ExternCall& call);

enum class BufferKind : uint8_t {
  Input,     // a graph placeholder: bound per call
  Constant,  // a parameter or constant tensor of the graph: bound at compile time
  Computed,  // filled by a kernel
  Extern,    // returned by an extern call
};

struct Buffer {
  std::string name;
  BufferKind kind{};
  Layout layout;
  int64_t input_index = -1;            // Input
  Tensor value;                        // Constant
  std::optional<Computation> compute;  // Computed
  std::optional<ExternCall> call;      // Extern
  // The graph nodes whose computation this buffer holds (Inductor's `origins`): the node that
  // made it, and the pointwise and view nodes inlined into its body. Names, sorted; for the
  // diagram of which node fused into which kernel.
  std::vector<std::string> origins;
  // Their ops, each once, in graph order: the middle of the name of the kernel that computes it.
  std::vector<std::string> origin_ops;
};

// Appends `s` to `list` unless it is there already.
void add_once(std::vector<std::string>& list, const std::string& s);

// A lowered graph: its buffers in execution order (inputs and constants first) and its
// results, each a view of a buffer.
struct Program {
  Device device;  // where the graph's tensors live: the device its kernels are generated for
  std::vector<Buffer> buffers;
  std::vector<TensorRef> outputs;
  // A dynamic graph's size symbols, with the values they had at capture: the code must hold
  // for every value, and heuristics (how to split loops, how wide a block) read the hints.
  std::unordered_map<sym::Expr, int64_t> hints;
  // Computed buffers the caller writes back into inputs, whole and in the same layout (result
  // buffer -> input buffer; Graph::written_back): a kernel that reads the input only at the
  // element it writes may write the result into the input's memory.
  std::map<std::string, std::string> written_back;

  const Buffer& buffer(const std::string& name) const;
  // The value of a size expression at the hints.
  int64_t hint(sym::Expr e) const;
};

// Whether `index` moves by one element from var = k to k + 1 for most k (three in four) of the
// first 32 in var's range, the index vars in `others` at 0: consecutive values side by side
// except where an unravelled dim carries (a split's [pieces, columns], a cat of three parts, a
// [batch, heads, tokens, features] tensor read as [tokens, heads * features]), which the exact
// sym::steps_by_one does not see through.
bool mostly_steps_by_one(const Program& p, sym::Expr index, sym::Expr var,
                         const std::vector<sym::Expr>& others);

// The text the `ir` logs print: one line per buffer with its layout and body.
std::string to_string(const Program& p);
std::string to_string(const Computation& c);

}  // namespace coil::ir

namespace coil::ir {
// Row-major flattening of an index over `sizes`, and its inverse.
sym::Expr ravel(const std::vector<sym::Expr>& index, const SymShape& sizes);
std::vector<sym::Expr> unravel(sym::Expr flat, const SymShape& sizes);
}  // namespace coil::ir
