// The post-grad pattern rewrites: matrix products that absorb the pointwise op after them
// into the library call (a bias add into addmm, relu into addmm_relu's epilogue, gelu into
// addmm_gelu's), saving a pass over the product in memory.
//
// gelu arrives decomposed (decomp/norms.cpp), so its pattern is the decomposition's
// arithmetic; it is fused for float32 only, where oneDNN computes it inside the product's
// kernel, vectorised. Other transcendental activations (silu, tanh, ...) stay in generated
// kernels: a library epilogue outside oneDNN would compute them with scalar math, slower than
// the memory pass it saves.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "passes/pass_util.h"
#include "passes/passes.h"
#include "passes/pattern_matcher.h"

namespace coil {

namespace {

bool single_user(const Node* n) { return n->users().size() == 1; }

// add(mm(a, b), bias), either way round -> addmm(bias, a, b), when the bias broadcasts to the
// product without promoting it (addmm does not promote, nor grow the product).
Pattern addmm_from_add() {
  Pattern p;
  p.name = "add(mm(a, b), bias) -> addmm(bias, a, b)";
  p.expr = op(OpId::add, {op(OpId::mm, {any("a"), any("b")}, "mm"), any("bias")});
  p.commutative = true;
  p.predicate = [](const Match& m) {
    const TensorMeta &mm = m["mm"]->tensor_meta(), &bias = m["bias"]->tensor_meta();
    const TensorMeta& sum = m.root->tensor_meta();
    // The mm's other users would still need it: fusing would compute the product twice.
    return single_user(m["mm"]) && bias.dtype == mm.dtype && bias.device == mm.device &&
           sum.dtype == mm.dtype && sum.sizes == mm.sizes;
  };
  p.replacement = [](Graph& g, const Match& m) {
    return g.call(OpId::addmm, {m["bias"], m["a"], m["b"]}, m.root);
  };
  return p;
}

// relu(addmm(bias, a, b)) -> addmm_relu(bias, a, b), when nothing else reads the addmm.
Pattern addmm_relu_from_relu() {
  Pattern p;
  p.name = "relu(addmm(bias, a, b)) -> addmm_relu(bias, a, b)";
  p.expr = op(OpId::relu, {op(OpId::addmm, {any("bias"), any("a"), any("b")}, "addmm")});
  p.predicate = [](const Match& m) { return single_user(m["addmm"]); };
  p.replacement = [](Graph& g, const Match& m) {
    return g.call(OpId::addmm_relu, {m["bias"], m["a"], m["b"]}, m.root);
  };
  return p;
}

// Whether every op the pattern matched, the root aside, is read only by other matched ops:
// otherwise the rewrite would leave it computed as well.
bool read_only_inside(const Match& m) {
  const std::vector<Node*>& ops = m.matched_ops;
  return std::all_of(ops.begin(), ops.end(), [&](const Node* n) {
    return n == m.root || std::all_of(n->users().begin(), n->users().end(), [&](Node* u) {
             return std::find(ops.begin(), ops.end(), u) != ops.end();
           });
  });
}

// Whether the bound node's second argument is the number v (a decomposition's constant).
bool second_arg_is(const Match& m, const std::string& name, double v) {
  const Node* n = m[name];
  if (n->args().size() < 2) return false;
  std::optional<double> x = detail_passes::uniform_value(n->args()[1]);
  return x && std::fabs(*x - v) <= 1e-12 * std::fabs(v);
}

// The product a gelu pattern activates; each place it occurs must match the same node.
PatternExpr addmm_x() { return op(OpId::addmm, {any("bias"), any("a"), any("b")}, "addmm"); }

// 0.5 * x * (1 + inner): both gelu decompositions' outer form.
PatternExpr half_x_times_one_plus(const PatternExpr& inner) {
  return op(OpId::mul, {op(OpId::mul, {addmm_x()}, "half"), op(OpId::add, {inner}, "one_plus")});
}

Pattern addmm_gelu_from(std::string name, PatternExpr expr, std::string approximate,
                        std::function<bool(const Match&)> constants) {
  Pattern p;
  p.name = std::move(name);
  p.expr = std::move(expr);
  p.commutative = true;
  p.predicate = [constants = std::move(constants)](const Match& m) {
    return m["addmm"]->tensor_meta().dtype == kFloat32 && second_arg_is(m, "half", 0.5) &&
           second_arg_is(m, "one_plus", 1.0) && constants(m) && read_only_inside(m);
  };
  p.replacement = [approximate = std::move(approximate)](Graph& g, const Match& m) {
    return g.call(OpId::addmm_gelu, {m["bias"], m["a"], m["b"], approximate}, m.root);
  };
  return p;
}

// gelu(addmm(bias, a, b)), decomposed: 0.5 x (1 + erf(x / sqrt(2))).
Pattern addmm_gelu_from_erf() {
  return addmm_gelu_from(
      "gelu(addmm(bias, a, b)) -> addmm_gelu(bias, a, b)",
      half_x_times_one_plus(op(OpId::erf, {op(OpId::mul, {addmm_x()}, "scaled")})), "none",
      [](const Match& m) { return second_arg_is(m, "scaled", 1 / std::numbers::sqrt2); });
}

// gelu(addmm(bias, a, b), "tanh"), decomposed:
// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
Pattern addmm_gelu_from_tanh() {
  PatternExpr x = addmm_x();
  PatternExpr cube = op(OpId::mul, {op(OpId::mul, {x, x}), x});
  PatternExpr poly = op(OpId::add, {x, op(OpId::mul, {cube}, "cubic")});
  return addmm_gelu_from("gelu(addmm(bias, a, b), 'tanh') -> addmm_gelu(bias, a, b, 'tanh')",
                         half_x_times_one_plus(op(OpId::tanh, {op(OpId::mul, {poly}, "scaled")})),
                         "tanh", [](const Match& m) {
                           return second_arg_is(m, "cubic", 0.044715) &&
                                  second_arg_is(m, "scaled", std::sqrt(2 / std::numbers::pi));
                         });
}

const std::vector<Pattern>& post_grad_patterns() {
  static const std::vector<Pattern> patterns = {addmm_from_add(), addmm_relu_from_relu(),
                                                addmm_gelu_from_erf(), addmm_gelu_from_tanh()};
  return patterns;
}

}  // namespace

bool run_post_grad_patterns(Graph& g) { return apply_patterns(g, post_grad_patterns()); }

}  // namespace coil
