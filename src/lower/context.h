// What lowering works with (Inductor's TensorBox/StorageBox): each graph value is a loader, a
// function from an index (one expression per dim) to the loop-IR value of that element. A
// pointwise op composes its inputs' loaders, so chains of pointwise ops inline into whoever
// reads them; a view transforms the index. A value is *realized* — written into a buffer —
// only where it must be: reductions, graph outputs, extern-call arguments, and pointwise
// values whose inlined body grew too large to recompute in every user.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/graph.h"
#include "ir/program.h"

namespace coil::lower {

using Index = std::vector<sym::Expr>;
using Loader = std::function<ir::Value(const Index&)>;

struct TensorBox {
  DType dtype{};
  SymShape sizes;
  Loader load;
  // Set when the value is a strided view of a realized buffer (an input, a constant, a
  // computed or extern buffer): externs and outputs can then use it without a copy.
  std::optional<ir::TensorRef> storage;
};

class Context {
 public:
  Context() = default;
  // Origin-reporting loaders (with_origin) point back at their Context: it never moves.
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // The value of a node argument (a node's single output, or a wrapped number as a 0-d box).
  const TensorBox& box(const Node* n) const;
  const std::vector<TensorBox>& boxes(const Node* n) const;
  void set(const Node* n, std::vector<TensorBox> values) { values_[n] = std::move(values); }

  // Index variables for a loop nest over `sizes`: prefix0, prefix1, ...
  static Index vars(const SymShape& sizes, const char* prefix);

  // A box reading `ref`'s view of its buffer.
  TensorBox from_storage(ir::TensorRef ref) const;
  // Adds a buffer to the program and returns its name.
  std::string add_buffer(ir::Buffer b);
  // Writes a pointwise box into a new contiguous buffer (no-op for a box that has storage).
  TensorBox realize(const TensorBox& b);
  // The same, dense in the dim order `order` (outermost first; {0, 2, 3, 1}: channels-last): the
  // buffer's loops run in that order, and the box is the buffer seen in b's own dim order.
  TensorBox realize(const TensorBox& b, const std::vector<size_t>& order);
  // A box whose loader memoizes per index, so sharing the box shares the IR it builds.
  static TensorBox memoized(DType dtype, SymShape sizes, Loader load);

  ir::Program& program() { return program_; }
  // The graph's shape env (null for a static graph): lowerings that compute a view's layout
  // over a buffer's run the op's symbolic shape rule, which may guard a decision there.
  ShapeEnv* shape_env() const { return env_; }
  void set_shape_env(ShapeEnv* env) { env_ = env; }

  // Origins (ir::Buffer::origins): which graph nodes each buffer computes. lower_graph calls
  // begin_node before lowering each node; a buffer a lowering adds itself (a reduction, an
  // extern call, an input) belongs to that node and to the nodes whose loaders it called.
  // with_origin makes a box's loader report its node to whichever buffer's body calls it, so a
  // realized buffer names every node inlined into it.
  void begin_node(const Node* n);
  TensorBox with_origin(TensorBox b, const Node* n);

 private:
  using Origins = std::set<const Node*>;
  std::string push_buffer(ir::Buffer b, const Origins& origins);

  ir::Program program_;
  ShapeEnv* env_ = nullptr;
  std::unordered_map<const Node*, std::vector<TensorBox>> values_;
  int next_buffer_ = 0;
  const Node* lowering_ = nullptr;
  // The nodes reported since the last buffer: the base frame for buffers lowerings add, one
  // more per realize() and per loader call in progress.
  std::vector<Origins> frames_ = {Origins{}};
};

// The lowering of one op: its output boxes, or nullopt to fall back to the eager kernel (the
// reason goes to the extern call and the logs).
using Lowering = std::optional<std::vector<TensorBox>> (*)(Context& cx, const Node& n,
                                                           std::string* why_not);
// The table: every op that has a lowering, registered by the files of this folder.
const Lowering* find_lowering(OpId op);
void register_pointwise(std::unordered_map<OpId, Lowering>& table);
void register_reductions(std::unordered_map<OpId, Lowering>& table);
void register_views(std::unordered_map<OpId, Lowering>& table);
void register_factories(std::unordered_map<OpId, Lowering>& table);
void register_concat_pad(std::unordered_map<OpId, Lowering>& table);
void register_indexing(std::unordered_map<OpId, Lowering>& table);
void register_pools(std::unordered_map<OpId, Lowering>& table);

// Broadcasting: the loader of `b` read at an index of `sizes` (right-aligned, size-1 dims at 0).
ir::Value load_broadcast(const TensorBox& b, const SymShape& sizes, const Index& index);
// A node argument as a value of `dtype` at `index` of `sizes`: a tensor (broadcast, cast) or
// a number (a constant).
ir::Value load_arg(const Context& cx, const NodeArg& a, DType dtype, const SymShape& sizes,
                   const Index& index);
// A size expression as a value of `dtype` (a constant when it is one).
ir::Value size_value(sym::Expr e, DType dtype);
// Whether 0 <= at < size, as a bool value; and `at` clamped into [0, size). A where evaluates
// both its branches (vectorised), so a load it may discard reads at the clamped index: a valid
// element instead of memory outside the buffer.
ir::Value in_range(sym::Expr at, sym::Expr size);
sym::Expr clamp_into(sym::Expr at, sym::Expr size);
// The layouts `n`'s op gives when its tensor arguments are laid out as `inputs` (by node; a
// buffer's view, or a dense value): the op's symbolic shape rule, checked against its meta
// function at the hints.
std::vector<SymLayout> layouts_over(Context& cx, const Node& n,
                                    const std::unordered_map<const Node*, ir::Layout>& inputs);
// Number of distinct IR nodes of a value: how much recomputing it costs.
size_t ir_size(const ir::Value& v);

}  // namespace coil::lower
