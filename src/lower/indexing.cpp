// Lowerings of gather, index_select and embedding as pointwise values over indirect loads: each
// output element reads its index value, and that value picks the element of the table. The
// table is realized first (a view of an input stays a view): an indirect load reads a buffer
// at a data-dependent address, which no producer could compute "at the same point" anyway —
// except a pointwise table read at few of its elements, computed at each of them from its own
// inputs, looked up.
// The index values stay inlined, so a pointwise producer of the indices fuses into the reader,
// and so does whatever consumes the gathered values.
#include <coil/error.h>

#include "lower/context.h"
#include "graph/dims.h"

namespace coil::lower {

namespace {

using Result = std::optional<std::vector<TensorBox>>;
using V = ir::ValueNode;

// The checks that stay with the eager kernel: an empty result (eager still checks every index
// and raises for a bad one; a kernel with no points checks nothing) and an empty dim to index
// (every index is out of range, and the table has no element to read instead).
bool eager_checks_instead(const SymShape& out, sym::Expr table_dim_size, const char* op,
                          std::string* why_not) {
  if (sym_numel(out)->is_const(0)) {
    *why_not = std::string(op) + " with an empty result: the eager kernel checks the indices";
    return true;
  }
  if (table_dim_size->is_const(0)) {
    *why_not = std::string(op) + " of an empty dim: runs the eager kernel, which raises";
    return true;
  }
  return false;
}

// A table's value at a looked-up coordinate, computed there: each of its loads whose index
// holds the coordinate (indirect_var 0) becomes an indirect load of that coordinate's value.
// Null when the value uses the coordinate otherwise (as a number) or looks something up
// itself (its own indirect loads would share the coordinate's name).
class LookUpInside : public ir::Mutator {
 public:
  LookUpInside(sym::Expr coordinate, ir::Value value, sym::Expr bound, const char* op)
      : coordinate_(std::move(coordinate)),
        value_(std::move(value)),
        bound_(std::move(bound)),
        op_(op) {}
  ir::Value mutate(const ir::Value& v) override {
    if (v->is_indirect() || (v->op() == ir::Op::Index && uses(v))) ok_ = false;
    if (v->op() == ir::Op::Load && !v->is_indirect() && uses(v))
      return V::indirect_load(v->buffer(), v->dtype(), v->index(), {value_}, {bound_}, op_);
    return Mutator::mutate(v);
  }
  bool ok() const { return ok_; }

 private:
  bool uses(const ir::Value& v) const { return sym::depends_on(v->index(), coordinate_); }
  sym::Expr coordinate_;
  ir::Value value_;
  sym::Expr bound_;
  const char* op_;
  bool ok_ = true;
};

// Whether a lookup of `out` elements reads so little of a table of `table` elements not yet in
// memory that computing the table's value at each looked-up element beats writing it whole (a
// loss's log-softmax over [tokens, classes], read once per token by its gather).
bool computes_at_lookups(const SymShape& out, const SymShape& table) {
  const sym::Expr n = sym_numel(out), m = sym_numel(table);
  return n->is_const() && m->is_const() && n->value() * 4 <= m->value();
}

// A box reading `table` with coordinate `dim` supplied by `index_at(i)`, an integer value at
// the output index i; every other coordinate of the table is `coords(i)`. The table is
// realized first unless it is a pointwise value computed at the lookups (computes_at_lookups).
TensorBox indirect_box(Context& cx, const TensorBox& table_box, const SymShape& out_sizes,
                       size_t dim, const char* op, std::function<Index(const Index&)> coords,
                       std::function<ir::Value(const Index&)> index_at) {
  if (!table_box.storage && computes_at_lookups(out_sizes, table_box.sizes)) {
    const sym::Expr bound = table_box.sizes[dim];
    const sym::Expr coordinate = V::indirect_var(0, bound);
    // Probed once: whether the table's value can be looked up inside at all.
    Index probe = Context::vars(table_box.sizes, "p");
    probe[dim] = coordinate;
    LookUpInside check(coordinate, V::make_constant(Scalar(int64_t{0}), kInt64), bound, op);
    check.mutate(table_box.load(probe));
    if (check.ok())
      return Context::memoized(table_box.dtype, out_sizes, [=](const Index& i) {
        Index j = coords(i);
        j[dim] = coordinate;
        LookUpInside inside(coordinate, V::cast(index_at(i), kInt64), bound, op);
        return inside.mutate(table_box.load(j));
      });
  }
  const ir::TensorRef table = *cx.realize(table_box).storage;
  const sym::Expr bound = table.view.sizes[dim];
  return Context::memoized(table.view.dtype, out_sizes, [=](const Index& i) {
    Index j = coords(i);
    j[dim] = V::indirect_var(0, bound);
    return V::indirect_load(table.buffer, table.view.dtype, table.view.address(j),
                            {V::cast(index_at(i), kInt64)}, {bound}, op);
  });
}

Result lower_gather(Context& cx, const Node& n, std::string* why_not) {
  const TensorBox& self = cx.box(std::get<Node*>(n.args()[0]));
  const TensorBox& index = cx.box(std::get<Node*>(n.args()[2]));
  const SymShape out = n.sym_layout().sizes;
  if (self.sizes.empty() || index.sizes.empty()) {
    *why_not = "gather of a 0-dim tensor: runs the eager kernel";
    return std::nullopt;
  }
  const auto dim = static_cast<size_t>(
      wrap_dim(std::get<int64_t>(n.args()[1]), static_cast<int64_t>(self.sizes.size()), "gather"));
  if (eager_checks_instead(out, self.sizes[dim], "gather", why_not)) return std::nullopt;
  // Out has the index's shape; the index may be smaller than self outside `dim`.
  return std::vector<TensorBox>{indirect_box(
      cx, self, out, dim, "gather", [](const Index& i) { return i; },
      [index](const Index& i) { return index.load(i); })};
}

Result lower_index_select(Context& cx, const Node& n, std::string* why_not) {
  const TensorBox& self = cx.box(std::get<Node*>(n.args()[0]));
  const TensorBox& index = cx.box(std::get<Node*>(n.args()[2]));
  const SymShape out = n.sym_layout().sizes;
  if (self.sizes.empty()) {
    *why_not = "index_select of a 0-dim tensor: runs the eager kernel";
    return std::nullopt;
  }
  const auto dim = static_cast<size_t>(wrap_dim(
      std::get<int64_t>(n.args()[1]), static_cast<int64_t>(self.sizes.size()), "index_select"));
  if (eager_checks_instead(out, self.sizes[dim], "index_select", why_not)) return std::nullopt;
  const bool scalar_index = index.sizes.empty();
  return std::vector<TensorBox>{indirect_box(
      cx, self, out, dim, "index_select", [](const Index& i) { return i; },
      [index, dim, scalar_index](const Index& i) {
        return index.load(scalar_index ? Index{} : Index{i[dim]});
      })};
}

// padding_idx only shapes the gradient: the forward lookup ignores it.
Result lower_embedding(Context& cx, const Node& n, std::string* why_not) {
  const TensorBox& weight = cx.box(std::get<Node*>(n.args()[0]));
  const TensorBox& indices = cx.box(std::get<Node*>(n.args()[1]));
  const SymShape out = n.sym_layout().sizes;
  if (eager_checks_instead(out, weight.sizes[0], "embedding", why_not)) return std::nullopt;
  const size_t lead = indices.sizes.size();
  return std::vector<TensorBox>{indirect_box(
      cx, weight, out, 0, "embedding",
      [lead](const Index& i) {
        return Index{nullptr, i[lead]};
      },
      [indices, lead](const Index& i) {
        return indices.load(Index(i.begin(), i.begin() + lead));
      })};
}

}  // namespace

void register_indexing(std::unordered_map<OpId, Lowering>& t) {
  t[OpId::gather] = lower_gather;
  t[OpId::index_select] = lower_index_select;
  t[OpId::embedding] = lower_embedding;
}

}  // namespace coil::lower
