// View canonicalisation: one spelling for each view, so that CSE, the pattern matcher and the
// lowering meet fewer forms. transpose and t become permute; a permute of a permute becomes
// one permute; a chain of reshape-like views of a contiguous tensor becomes one reshape; an
// unsqueeze undone by a squeeze disappears.
#include <numeric>

#include "graph/sym_node.h"
#include "passes/pass_util.h"
#include "passes/passes.h"

namespace coil {

namespace {

bool is_call(const Node* n, OpId op) {
  return n != nullptr && n->kind() == NodeKind::Call && n->op() == op;
}

// A dim as the op read it (negative counts from the end); the meta function checked range.
int64_t wrap(int64_t dim, size_t ndim) { return dim < 0 ? dim + static_cast<int64_t>(ndim) : dim; }

Shape identity(size_t ndim) {
  Shape p(ndim);
  std::iota(p.begin(), p.end(), 0);
  return p;
}

// The dims a transpose, t or permute call reorders its input's dims into.
Shape permutation(const Node* n) {
  size_t r = n->tensor_meta().sizes.size();
  if (n->op() == OpId::permute) {
    Shape dims = std::get<Shape>(n->args()[1]);
    for (int64_t& d : dims) d = wrap(d, r);
    return dims;
  }
  Shape dims = identity(r);
  if (n->op() == OpId::transpose) {
    std::swap(dims[wrap(std::get<int64_t>(n->args()[1]), r)],
              dims[wrap(std::get<int64_t>(n->args()[2]), r)]);
  } else if (r == 2) {  // t of a 0-D or 1-D tensor is the identity
    std::swap(dims[0], dims[1]);
  }
  return dims;
}

// transpose(x, a, b) and t(x) as permute(x, dims); a permute of a permute as one permute of
// the inner one's input (the inner one, earlier in the graph, is canonical already).
Node* canonical_permute(Graph& g, Node* n) {
  Node* x = node_arg(n->args()[0]);
  Shape dims = permutation(n);
  bool merged = is_call(x, OpId::permute);
  if (merged) {
    Shape inner = permutation(x);
    for (int64_t& d : dims) d = inner[static_cast<size_t>(d)];
    x = node_arg(x->args()[0]);
  }
  if (n->op() == OpId::permute && !merged) return nullptr;
  return g.call(OpId::permute, {x, dims}, n);
}

bool reshape_like(const Node* n) {
  return n != nullptr && n->kind() == NodeKind::Call && is_reshape_like(n->op());
}

// A chain of two or more reshape-like views whose input is contiguous -> one reshape of that
// input, which is a view too (a non-contiguous input may need a copy somewhere in the chain,
// which a single reshape would place differently).
Node* merge_reshapes(Graph& g, Node* n) {
  int length = 0;
  Node* in = n;
  for (; reshape_like(in); ++length) in = node_arg(in->args()[0]);
  if (length < 2 || !in->tensor_meta().is_contiguous()) return nullptr;
  return g.call(OpId::reshape, {in, shape_arg(g, n->sym_layout().sizes)}, n);
}

// squeeze(unsqueeze(x, d), [d]) -> x.
bool remove_unsqueeze_squeeze(Graph& g, Node* n) {
  Node* u = node_arg(n->args()[0]);
  const auto* dims = std::get_if<Shape>(&n->args()[1]);
  if (!is_call(u, OpId::unsqueeze) || dims == nullptr || dims->size() != 1) return false;
  size_t r = u->tensor_meta().sizes.size();
  if (wrap((*dims)[0], r) != wrap(std::get<int64_t>(u->args()[1]), r)) return false;
  return detail_passes::replace_with_existing(g, n, node_arg(u->args()[0]));
}

}  // namespace

bool run_canonicalize_views(Graph& g) {
  bool changed = false;
  for (Node* n : g.nodes()) {
    if (n->kind() != NodeKind::Call) continue;
    if (n->op() == OpId::squeeze && remove_unsqueeze_squeeze(g, n)) {
      changed = true;
      continue;
    }
    Node* fresh = nullptr;
    if (n->op() == OpId::transpose || n->op() == OpId::t || n->op() == OpId::permute) {
      fresh = canonical_permute(g, n);
    } else if (reshape_like(n)) {
      fresh = merge_reshapes(g, n);
    }
    if (fresh == nullptr) continue;
    detail_passes::replace_with_new(g, n, fresh);
    changed = true;
  }
  return changed;
}

}  // namespace coil
