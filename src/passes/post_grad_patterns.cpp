// The post-grad pattern rewrites: matrix products that absorb the pointwise op after them
// into the library call (a bias add into addmm, relu into addmm_relu's epilogue), saving a
// pass over the product in memory.
//
// Only cheap, exact epilogues are fused here. gelu, silu, tanh and the other transcendental
// activations stay in generated kernels, whose vector math is cheaper than the pass it would
// save. Measured for gelu as oneDNN's own eltwise post-op inside the product's kernel (mlp's
// 2048x512 @ 512x2048), it was slower than the product then the generated gelu kernel
// (bench/probes/gelu_postop.cpp measures it; measured: docs/performance.md).
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

const std::vector<Pattern>& post_grad_patterns() {
  static const std::vector<Pattern> patterns = {addmm_from_add(), addmm_relu_from_relu()};
  return patterns;
}

}  // namespace

bool run_post_grad_patterns(Graph& g) { return apply_patterns(g, post_grad_patterns()); }

}  // namespace coil
