// The check every decomposition test makes: one call of an op on concrete arguments becomes a
// graph (each tensor a placeholder with its own layout), is decomposed, verified, searched for
// leftover composite ops and dead nodes, interpreted, and compared with run_eager of the call
// itself.
#pragma once

#include <string>
#include <vector>

#include "decomp/decompose.h"
#include "graph/interpreter.h"
#include "graph/op_examples.h"
#include "graph/printer.h"

namespace coil::testing {

// The graph of one call: a placeholder per tensor argument, in order.
inline Graph call_graph(OpId op, const std::vector<Arg>& args, std::vector<Tensor>& inputs) {
  Graph g;
  auto input = [&](const Tensor& t) {
    inputs.push_back(t);
    return g.placeholder("in" + std::to_string(inputs.size() - 1), meta_of(t));
  };
  std::vector<NodeArg> nargs;
  for (const Arg& a : args) {
    if (auto* t = std::get_if<Tensor>(&a)) {
      nargs.push_back(input(*t));
    } else if (auto* ts = std::get_if<std::vector<Tensor>>(&a)) {
      std::vector<Node*> nodes;
      for (const Tensor& t : *ts) nodes.push_back(input(t));
      nargs.push_back(nodes);
    } else {
      nargs.push_back(to_node_arg(a));
    }
  }
  g.output({g.call(op, nargs)});
  return g;
}

inline std::string describe_call(OpId op, const std::vector<Arg>& args) {
  std::string s = std::string(op_name(op)) + "(";
  for (const Arg& a : args) {
    if (auto* t = std::get_if<Tensor>(&a)) s += meta_str(meta_of(*t));
    if (auto* ts = std::get_if<std::vector<Tensor>>(&a))
      for (const Tensor& t : *ts) s += meta_str(meta_of(t)) + " ";
    if (auto* d = std::get_if<double>(&a)) s += std::to_string(*d);
    if (auto* i = std::get_if<int64_t>(&a)) s += std::to_string(*i);
    if (auto* b = std::get_if<bool>(&a)) s += *b ? "True" : "False";
    if (auto* str = std::get_if<std::string>(&a)) s += '"' + *str + '"';
    s += ", ";
  }
  return s + ")";
}

// Results agree to the dtype's precision; integer and bool results exactly.
inline void expect_matches(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.dtype(), want.dtype());
  Tol tol = is_floating(want.dtype()) ? tol_for(want.dtype()) : Tol{0, 0};
  expect_close(got, values(want), want.sizes(), tol.rtol, tol.atol);
}

// Decomposes the call and checks the result against eager. `declines`: the decomposition must
// leave the op in place instead.
inline void check_decomposition(OpId op, std::vector<Arg> args, bool declines = false) {
  SCOPED_TRACE(describe_call(op, args));
  normalize_args(op, args);
  std::vector<Tensor> inputs;
  Graph g = call_graph(op, args, inputs);
  const std::string before = print_graph(g);
  EXPECT_EQ(decompose(g), !declines);
  verify(g);
  if (declines) {
    EXPECT_EQ(print_graph(g), before);
    return;
  }
  SCOPED_TRACE(print_graph(g));
  for (const Node* n : g.nodes()) {
    if (n->kind() != NodeKind::Call) continue;
    EXPECT_EQ(find_decomposition(n->op()), nullptr) << "left over: " << print_node(*n);
    EXPECT_FALSE(n->users().empty()) << "dead: " << print_node(*n);
  }
  manual_seed(0);  // a decomposition that draws draws what the op's kernel draws
  Tensor want = run_eager(op, args).at(0);
  manual_seed(0);
  std::vector<Tensor> got = interpret(g, inputs);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].sizes(), want.sizes());
  expect_matches(got[0], want);
}

// An argument list: tensors, and literals made with op_examples.h's I, F, B, L, Str, None.
using A = std::vector<Arg>;

// Random values, in a non-contiguous layout when asked.
inline Tensor rnd(const Shape& sizes, DType t = kFloat32, bool strided = false, double lo = -2,
                  double hi = 2) {
  Tensor x = random(sizes, t, lo, hi);
  return strided ? noncontiguous(x) : x;
}

}  // namespace coil::testing
