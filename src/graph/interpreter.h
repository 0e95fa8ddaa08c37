// Running a graph on real tensors, one eager kernel per node: the reference every compiled
// graph is checked against.
#pragma once

#include <functional>
#include <vector>

#include "graph/graph.h"

namespace coil {

// How interpret() runs what it runs. The defaults are the reference path; a replay through
// autograd (aot/joint_graph.h) calls each op through the dispatcher instead, so that autograd
// records it and the tracer sees it, and may stand a proxy in for a parameter.
struct InterpretHooks {
  // Runs one call node on its arguments (default: run_eager).
  std::function<std::vector<Tensor>(const Node& call, std::vector<Arg> args)> call;
  // The tensor a parameter node stands for (default: the tensor it references).
  std::function<Tensor(const Node& parameter)> parameter;
  // Whether inputs must be real tensors like the placeholders' (proxies are not).
  bool check_inputs = true;
};

// Binds `inputs` to the placeholders in order (their dtypes, sizes and devices must match;
// any strides do), runs every call, and returns the output node's results. Each intermediate
// is released after its last use.
std::vector<Tensor> interpret(const Graph& g, const std::vector<Tensor>& inputs,
                              const InterpretHooks& hooks = {});

}  // namespace coil
