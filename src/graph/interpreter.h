// Running a graph on real tensors, one eager kernel per node: the reference every compiled
// graph is checked against.
#pragma once

#include <vector>

#include "graph/graph.h"

namespace coil {

// Binds `inputs` to the placeholders in order (their dtypes, sizes and devices must match;
// any strides do), runs every call with run_eager, and returns the output node's results.
// Parameters use the tensors they reference; each intermediate is released after its last use.
std::vector<Tensor> interpret(const Graph& g, const std::vector<Tensor>& inputs);

}  // namespace coil
