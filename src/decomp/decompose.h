// Decompositions (PrimTorch's role): composite ops rewritten, one table entry per op, into the
// small primitive set the lowering stage handles directly: pointwise ops (gelu and silu
// excepted), the reductions sum/prod/amax/amin/argmax/argmin/var/any/all, views, extern
// kernels (mm, bmm, addmm, conv2d), factories, and the indexing/scan/pool ops.
#pragma once

#include <vector>

#include "graph/graph.h"

namespace coil {

// Builds the replacement of `node` from nodes inserted right before it and returns the node
// that takes its place (same dtype and sizes; strides may differ), or nullptr to decline this
// instance (batch_norm updating running statistics, dropout that draws random numbers). A
// decomposition declines before it inserts anything.
using Decomposition = Node* (*)(Graph& g, Node* node);

// The op's decomposition, or nullptr when the op is primitive.
const Decomposition* find_decomposition(OpId op);

// Rewrites every call that has a decomposition, again and again until none applies (a
// decomposition may emit other composite ops: cross_entropy -> log_softmax + nll_loss), and
// erases the replaced nodes. Returns whether the graph changed.
bool decompose(Graph& g);

// The ops that have a decomposition, in op_list.def order.
std::vector<OpId> decomposed_ops();

}  // namespace coil
