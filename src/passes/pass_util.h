// What several graph passes need to know about nodes: which calls may not be merged, moved or
// dropped, which values share storage, and when one node may stand in for another.
#pragma once

#include <optional>

#include "graph/graph.h"

namespace coil::detail_passes {

// Draws random numbers (rand, randn, randint, dropout in training with p > 0, attention with
// dropout): two such calls are different values, and none is known before the program runs.
bool is_random(const Node& n);
// Writes to a tensor besides its outputs (batch_norm in training updates its running
// statistics): it must run exactly once, even when nobody reads its result.
bool has_side_effects(const Node& n);

// The number a tensor argument stands for: a plain number, or a constant node whose elements
// all hold that number.
std::optional<double> uniform_value(const NodeArg& a);

// Whether exactly one node reads `n` (a pattern may then rewrite it without leaving a copy).
inline bool single_user(const Node* n) { return n->users().size() == 1; }

// Whether `n`'s value, or a view of it, is one of the graph's results.
bool reaches_output(const Node* n);
// Whether `n`'s value, or a view of it, is read by as_strided, which addresses the storage
// behind its input rather than the input's elements: giving it a different storage with the
// same elements changes what it reads.
bool reaches_as_strided(const Node* n);

// Makes `existing` (computed before `node`) take the place of `node`, and erases `node`, when
// nobody can tell the difference: the same dtype, sizes, strides and device, no as_strided
// reads a different storage, and no graph result starts to be (or to alias) a graph input,
// parameter or constant that it did not alias before (the caller owns every result unless
// the program itself returned its input). Returns whether it did.
bool replace_with_existing(Graph& g, Node* node, Node* existing);

// Makes the new node `fresh` take the place of `node`, and erases `node`.
void replace_with_new(Graph& g, Node* node, Node* fresh);

}  // namespace coil::detail_passes
