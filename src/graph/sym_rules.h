// The symbolic shape rules: an op's output layouts as expressions over size symbols, from its
// inputs' layouts and its arguments (torch's meta functions over SymInts). The meta function
// has already run on the hints (validating the call and giving the concrete outputs); a rule
// only computes with expressions, and where its result depends on a relation between sizes
// (broadcasting two sizes, the inner dims of a product, where a slice ends) it decides with
// the hints and guards the decision in the ShapeEnv.
//
// Every rule must agree with its meta function at the hints; sym_layouts checks that it does.
// An op without a rule gets its outputs' hints as constants after its inputs' symbols are
// specialised (guarded equal to their hints): correct, only less general.
#pragma once

#include <functional>
#include <vector>

#include "graph/graph.h"
#include "graph/shape_env.h"

namespace coil {

// The layout of a tensor argument (a node).
using LayoutOf = std::function<SymLayout(const Node*)>;

// The symbolic layouts of a call's outputs. `metas` are the outputs' concrete metas (what the
// meta function gave for the hints); `env` may be null when no input is symbolic.
std::vector<SymLayout> sym_layouts(OpId op, const std::vector<NodeArg>& args,
                                   const LayoutOf& layout_of, const std::vector<TensorMeta>& metas,
                                   ShapeEnv* env);

// An int argument as an expression (a plain int as a constant); an int list likewise.
sym::Expr sym_int_arg(const NodeArg& a);
SymShape sym_ints_arg(const NodeArg& a);

namespace detail_sym {

// What a rule reads: the call's arguments as expressions, and the env to guard decisions in.
class SymCall {
 public:
  SymCall(OpId op, const std::vector<NodeArg>& args, const LayoutOf& layout_of,
          const std::vector<TensorMeta>& metas, ShapeEnv* env)
      : op_(op), args_(args), layout_of_(layout_of), metas_(metas), env_(env) {}

  OpId op() const { return op_; }
  const std::vector<NodeArg>& args() const { return args_; }
  const std::vector<TensorMeta>& metas() const { return metas_; }
  bool is_tensor(size_t i) const;
  SymLayout layout(size_t i) const;                // a tensor argument
  SymShape sizes(size_t i) const;                  // of a tensor argument; {} for a number or None
  std::vector<SymLayout> layouts(size_t i) const;  // a tensor list
  sym::Expr int_arg(size_t i) const;
  SymShape ints(size_t i) const;
  int64_t plain_int(size_t i) const;  // an int needed as a number (a dim): guarded if symbolic
  int64_t guard_int(sym::Expr e) const;
  bool has(size_t i) const;  // not None
  int arg_index(const char* name) const;

  // Decisions taken with the hints and guarded (see ShapeEnv); constants need no env.
  bool eq(sym::Expr a, sym::Expr b) const;
  bool lt(sym::Expr a, sym::Expr b) const;
  bool le(sym::Expr a, sym::Expr b) const;
  sym::Expr simplify(sym::Expr e) const { return env_ ? env_->simplify(e) : e; }
  SymShape simplify(const SymShape& s) const { return env_ ? env_->simplify(s) : s; }
  int64_t hint(sym::Expr e) const;

  // An output of these sizes, with strides as its concrete meta's (contiguous, or dense in
  // another order).
  SymLayout result(SymShape sizes, size_t output = 0) const;
  std::string why() const;  // the reason guards carry: the op's name

 private:
  OpId op_;
  const std::vector<NodeArg>& args_;
  const LayoutOf& layout_of_;
  const std::vector<TensorMeta>& metas_;
  ShapeEnv* env_;
};

using Rule = std::vector<SymLayout> (*)(const SymCall&);
// The rules of the view ops (sym_views.cpp) and of convolution and pooling (sym_conv_pool.cpp).
void register_view_rules(std::vector<std::pair<OpId, Rule>>& rules);
void register_conv_pool_rules(std::vector<std::pair<OpId, Rule>>& rules);
// Broadcasting, guarded: two sizes other than 1 in one position must be equal.
SymShape broadcast(const SymCall& c, const std::vector<SymShape>& shapes);
// What the rules share: one result, shapes joined or cut, sizes guarded equal pairwise.
inline std::vector<SymLayout> one(SymLayout l) { return {std::move(l)}; }
SymShape concat(SymShape a, const SymShape& b);
SymShape leading(const SymShape& s, size_t drop);  // without the last `drop` dims
void eq_all(const SymCall& c, const SymShape& a, const SymShape& b);

}  // namespace detail_sym

}  // namespace coil
