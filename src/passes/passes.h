// Every graph pass: `run_NAME(g)` rewrites `g` in place and returns whether it changed it.
// Each lives in its own file of this folder; pass.h groups them for the pipeline.
#pragma once

#include <functional>

#include "graph/graph.h"

namespace coil {

// Removes calls, getitems, constants and parameters nobody uses (never placeholders, nor
// calls with side effects such as batch_norm's running-statistics update).
bool run_dce(Graph& g);
// Common subexpression elimination: a call with the same op and arguments as an earlier one
// (and a getitem or constant equal to an earlier one) is replaced by it. Random ops never are.
bool run_cse(Graph& g);
// Computes calls whose tensor inputs are all constants at compile time.
bool run_constant_folding(Graph& g);
// Removes calls that return their input unchanged: x + 0, x * 1, a cast to the same dtype, a
// view to the same geometry, clone.
bool run_remove_noops(Graph& g);
// Cheaper forms that compute exactly the same values: pow(x, 2) -> x * x, neg(neg(x)) -> x...
bool run_algebraic_simplification(Graph& g);
// One form for each view: transpose and t as permute, chains of reshapes as one reshape.
bool run_canonicalize_views(Graph& g);
// softmax(q @ k^T * scale) @ v, written out, -> one scaled_dot_product_attention call.
bool run_fuse_attention(Graph& g);
// The post-grad pattern rewrites: add(mm, bias) -> addmm, relu(addmm) -> addmm_relu.
bool run_post_grad_patterns(Graph& g);
bool run_joint_graph_patterns(Graph& g);
// Matrix products whose sizes are not multiples of the device's alignment for their dtype
// (heuristics' product_alignment) run padded with zeros, the result narrowed back.
bool run_pad_products(Graph& g);
// The same with the alignment given: elements per row piece for a device and dtype (1: none).
using ProductAlignment = std::function<int64_t(Device, DType)>;
bool pad_products(Graph& g, const ProductAlignment& alignment);
// Freezing: batch_norm in inference after a conv2d whose weights are captured tensors folds
// into new weights and bias of the conv2d, computed now from the tensors' values.
bool run_fold_conv_batch_norm(Graph& g);

}  // namespace coil
