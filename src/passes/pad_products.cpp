// Products padded to aligned sizes (Inductor's pad_mm): a library product whose M, N or K is
// not a multiple of the device's alignment for its dtype runs on slower kernels (cuBLASLt's
// tensor-core kernels want rows of whole 16-byte pieces: GPT-2's tied head, 4096 x 768 x 50257
// in bf16, ran at 94 TFLOP/s, and at 671 with N padded to 50264, bench/probes/head_padding.cpp).
// Each unaligned dim is padded with zeros in the operands that have it, and the result is the
// padded product narrowed back: zeros added along K add nothing, rows and columns added along M
// and N are cut off. A pad fuses into the kernel that writes the operand (a weight's autocast
// cast writes the padded weight); an operand read transposed is padded in its own order. A
// result the graph returns is copied out contiguous, the strides eager gives it.
#include <array>

#include "heuristics/heuristics.h"
#include "passes/pass_util.h"
#include "passes/passes.h"

namespace coil {

namespace {

bool is_product(const Node& n) {
  return n.kind() == NodeKind::Call &&
         (n.op() == OpId::mm || n.op() == OpId::addmm || n.op() == OpId::addmm_relu);
}

// Below this size in any dim the padding's copies cost about what the faster kernel saves (a
// padded operand is read and written once more, the product's time grows with the other dims).
constexpr int64_t kMinDim = 64;

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

bool is_transpose(const Node* n) {
  if (!n || n->kind() != NodeKind::Call || n->op() != OpId::permute) return false;
  const Shape& dims = std::get<Shape>(n->args()[1]);
  return dims.size() == 2 && (dims[0] + 2) % 2 == 1;
}

// A cast of a transpose (autocast's of a tied weight read as w.t()): the transpose of the cast.
bool is_cast_of_transpose(const Node* n) {
  return n && n->kind() == NodeKind::Call && n->op() == OpId::to_dtype &&
         is_transpose(node_arg(n->args()[0]));
}

// `x` with `extra` zeros after its last element along `dim` (of its 1 or 2 dims). A transposed
// operand is padded before its transpose, so that the pad writes the memory order the product
// reads; a cast of a transpose is cast first, so that the cast writes the weight in its own
// order rather than transposing it.
Node* pad_along(Graph& g, Node* x, int64_t dim, int64_t extra, Node* before) {
  if (extra == 0) return x;
  if (is_cast_of_transpose(x)) {
    std::vector<NodeArg> args = x->args();
    args[0] = node_arg(node_arg(args[0])->args()[0]);
    Node* cast = g.call(OpId::to_dtype, args, before);
    return g.call(OpId::permute, {pad_along(g, cast, 1 - dim, extra, before), Shape{1, 0}}, before);
  }
  if (is_transpose(x))
    return g.call(OpId::permute,
                  {pad_along(g, node_arg(x->args()[0]), 1 - dim, extra, before), Shape{1, 0}},
                  before);
  const int64_t rank = static_cast<int64_t>(x->tensor_meta().sizes.size());
  // (before, after) pairs from the last dim back to `dim`.
  Shape pads(static_cast<size_t>(2 * (rank - dim)), 0);
  pads.back() = extra;
  return g.call(OpId::pad, {x, pads, std::string("constant"), 0.0}, before);
}

bool pad(Graph& g, Node* product, const ProductAlignment& alignment) {
  const TensorMeta& out = product->tensor_meta();
  const bool has_bias = product->op() != OpId::mm;
  Node* a = node_arg(product->args()[has_bias ? 1 : 0]);
  Node* b = node_arg(product->args()[has_bias ? 2 : 1]);
  if (!a || !b || a->tensor_meta().sizes.size() != 2 || b->tensor_meta().sizes.size() != 2)
    return false;
  const int64_t align = alignment(out.device, out.dtype);
  if (align <= 1) return false;
  for (const Node* n : {product, a, b})
    for (const sym::Expr& size : n->sym_layout().sizes)
      if (!size->is_const()) return false;  // a symbolic size may be aligned or not
  const int64_t m = out.sizes[0], n = out.sizes[1], k = a->tensor_meta().sizes[1];
  if (m < kMinDim || n < kMinDim || k < kMinDim) return false;
  const int64_t pm = round_up(m, align) - m, pn = round_up(n, align) - n,
                pk = round_up(k, align) - k;
  if (pm == 0 && pn == 0 && pk == 0) return false;

  Node* at = product;
  std::vector<NodeArg> args = product->args();
  args[has_bias ? 1 : 0] = pad_along(g, pad_along(g, a, 0, pm, at), 1, pk, at);
  args[has_bias ? 2 : 1] = pad_along(g, pad_along(g, b, 0, pk, at), 1, pn, at);
  if (has_bias) {
    // The bias broadcasts to [M, N] from the right: it is padded along a dim it has in full.
    Node* bias = node_arg(args[0]);
    const Shape& bs = bias->tensor_meta().sizes;
    const int64_t rank = static_cast<int64_t>(bs.size());
    const std::array<int64_t, 2> extra = {pm, pn};
    for (int64_t d = 0; d < 2; ++d) {
      const int64_t bd = d - (2 - rank);
      if (bd >= 0 && bs[static_cast<size_t>(bd)] > 1) bias = pad_along(g, bias, bd, extra[d], at);
    }
    args[0] = bias;
  }
  Node* padded = g.call(product->op(), args, at);
  Node* result = padded;
  if (pm) result = g.call(OpId::narrow, {result, int64_t{0}, int64_t{0}, m}, at);
  if (pn) result = g.call(OpId::narrow, {result, int64_t{1}, int64_t{0}, n}, at);
  if ((pm || pn) && detail_passes::reaches_output(product))
    result = g.call(OpId::contiguous, {result}, at);
  detail_passes::replace_with_new(g, product, result);
  return true;
}

}  // namespace

bool pad_products(Graph& g, const ProductAlignment& alignment) {
  bool changed = false;
  for (Node* n : g.nodes())
    if (is_product(*n)) changed |= pad(g, n, alignment);
  return changed;
}

bool run_pad_products(Graph& g) {
  return pad_products(g, [](Device device, DType dtype) {
    return heuristics::for_device(device).product_alignment(dtype);
  });
}

}  // namespace coil
