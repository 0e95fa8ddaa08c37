// The post-grad pattern rewrites: matrix products that absorb the pointwise op after them
// into the library call (a bias add into addmm, relu into addmm_relu's epilogue), saving a
// pass over the product in memory, or the transpose after them (written in its own order); and
// a one-hot scattered into zeros as a comparison with
// the positions (Inductor's scatter_upon_const_tensor), which fuses into its readers (also a
// joint-graph pattern).
//
// Only cheap, exact epilogues are fused here. gelu, silu, tanh and the other transcendental
// activations stay in generated kernels, whose vector math is cheaper than the pass it would
// save. Measured for gelu as oneDNN's own eltwise post-op inside the product's kernel (mlp's
// 2048x512 @ 512x2048), it was slower than the product then the generated gelu kernel
// (bench/probes/gelu_postop.cpp measures it; measured: docs/performance.md).
#include <optional>

#include "passes/pass_util.h"
#include "passes/passes.h"
#include "passes/pattern_matcher.h"

namespace coil {

namespace {

using detail_passes::single_user;

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

// permute(mm(a, b), [1, 0]) -> mm(b^T, a^T), when nothing else reads the product and the
// transpose is not a graph result (whose strides eager gives): (a b)^T written in its own order,
// the operands' transposes free views for the library. A weight tied to a linear layer's
// transposed use (GPT-2's embedding and its output layer) gets its gradient as mm(x^T, g)^T;
// adding it to the embedding's gradient read it a row of the product apart for each element.
Pattern mm_transposed_from_permute() {
  Pattern p;
  p.name = "permute(mm(a, b), [1, 0]) -> mm(permute(b), permute(a))";
  p.expr = op(OpId::permute, {op(OpId::mm, {any("a"), any("b")}, "mm")});
  p.predicate = [](const Match& m) {
    const Shape& dims = std::get<Shape>(m.root->args()[1]);
    if (!single_user(m["mm"]) || dims.size() != 2 || (dims[0] + 2) % 2 != 1)  // [1, 0], [-1, 0]
      return false;
    for (const Node* user : m.root->users())
      if (user->kind() == NodeKind::Output) return false;
    return true;
  };
  p.replacement = [](Graph& g, const Match& m) {
    Node* root = m.root;
    const Shape swap = {1, 0};
    return g.call(
        OpId::mm,
        {g.call(OpId::permute, {m["b"], swap}, root), g.call(OpId::permute, {m["a"], swap}, root)},
        root);
  };
  return p;
}

// scatter_add(zeros, dim, index, src) with one index per line along dim (and index and src
// as large as the zeros in every other dim) -> where(positions == index, src, 0): the gradient
// of a gather, as cross-entropy's one-hot targets. The scatter wrote the whole zero tensor and
// then the values; the comparison is pointwise and fuses into whoever reads it.
// A scatter's dim, wrapped; nullopt when it is not a dim of the output.
std::optional<int64_t> scatter_dim(const Node& scatter) {
  const auto* dim = std::get_if<int64_t>(&scatter.args()[1]);
  const int64_t rank = static_cast<int64_t>(scatter.tensor_meta().sizes.size());
  if (!dim || *dim < -rank || *dim >= rank) return std::nullopt;
  return *dim < 0 ? *dim + rank : *dim;
}

Pattern one_hot_from_scatter_into_zeros() {
  Pattern p;
  p.name = "scatter_add(zeros, dim, index, src) -> where(positions == index, src, 0)";
  p.expr = op(OpId::scatter_add, {op(OpId::full, {}, "zeros")});
  p.predicate = [](const Match& m) {
    const Node& root = *m.root;
    const auto* fill = std::get_if<Scalar>(&m["zeros"]->args()[1]);
    const auto* index = std::get_if<Node*>(&root.args()[2]);
    const auto* src = std::get_if<Node*>(&root.args()[3]);
    const std::optional<int64_t> d = scatter_dim(root);
    if (!fill || fill->to_double() != 0 || !d || !index || !src) return false;
    const TensorMeta& out = root.tensor_meta();
    const TensorMeta &i = (*index)->tensor_meta(), &v = (*src)->tensor_meta();
    if (i.sizes.size() != out.sizes.size() || v.sizes != i.sizes || v.dtype != out.dtype ||
        out.dtype == kBool)
      return false;
    const SymLayout layout = root.sym_layout();
    for (size_t k = 0; k < out.sizes.size(); ++k)
      if (!layout.sizes[k]->is_const() ||
          i.sizes[k] != (static_cast<int64_t>(k) == *d ? 1 : out.sizes[k]))
        return false;
    return true;
  };
  p.replacement = [](Graph& g, const Match& m) {
    Node* root = m.root;
    const TensorMeta& out = root->tensor_meta();
    const int64_t d = *scatter_dim(*root);
    Node* positions = g.call(
        OpId::arange,
        {Scalar(int64_t{0}), Scalar(out.sizes[d]), Scalar(int64_t{1}), kInt64, out.device}, root);
    Shape along(out.sizes.size(), 1);
    along[d] = out.sizes[d];
    Node* hit = g.call(
        OpId::eq, {g.call(OpId::view, {positions, along}, root), std::get<Node*>(root->args()[2])},
        root);
    // An integer zero: it takes the values' dtype, float or integer.
    return g.call(OpId::where, {hit, std::get<Node*>(root->args()[3]), Scalar(int64_t{0})}, root);
  };
  return p;
}

const std::vector<Pattern>& post_grad_patterns() {
  static const std::vector<Pattern> patterns = {addmm_from_add(), addmm_relu_from_relu(),
                                                mm_transposed_from_permute(),
                                                one_hot_from_scatter_into_zeros()};
  return patterns;
}

}  // namespace

bool run_post_grad_patterns(Graph& g) { return apply_patterns(g, post_grad_patterns()); }

// The one-hot rewrite runs on the joint graph too, before the partitioner: a scatter is not
// recomputed in the backward, so a cross-entropy's gradient would otherwise be cut after it
// (the whole [tokens, classes] gradient saved by the forward) rather than at the logits.
bool run_joint_graph_patterns(Graph& g) {
  static const std::vector<Pattern> patterns = {one_hot_from_scatter_into_zeros()};
  return apply_patterns(g, patterns);
}

}  // namespace coil
