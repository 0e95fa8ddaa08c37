// The joint graph (AOTAutograd's first step): the captured forward graph replayed on proxies
// with autograd recording, then the backward traced through the same derivative rules eager
// autograd runs. One graph computes the forward results and the gradients of the inputs and
// parameters that require grad from the results' gradients (the tangents).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "graph/graph.h"

namespace coil::aot {

struct JointGraph {
  // Placeholders: the forward's inputs (primals), then one tangent per differentiable result.
  // Outputs: the forward's outputs, then one gradient per entry of `grad_targets`.
  std::shared_ptr<Graph> graph;
  size_t num_primals = 0;
  size_t num_forward_outputs = 0;
  // Which forward outputs have a tangent (the results that require grad), in order.
  std::vector<size_t> differentiable_outputs;
  // What each gradient output is the gradient of: a primal (by placeholder position) or a
  // captured parameter.
  struct GradTarget {
    int64_t primal = -1;
    Tensor parameter;
  };
  std::vector<GradTarget> grad_targets;
};

// `requires_grad`: per placeholder of `forward`. Only the first `num_results` outputs are
// results (the rest are in-place updates of inputs, which get no tangent). Parameters of the
// graph that require grad get gradients too.
JointGraph build_joint_graph(const Graph& forward, const std::vector<bool>& requires_grad,
                             size_t num_results);

// How a replay may differ from the graph: `parameter` (when set) gives the tensor that stands
// for each parameter that requires grad, in node order; `update_state` false keeps training
// batch_norm from updating its running statistics (a second run of a forward already run).
struct ReplayHooks {
  std::function<Tensor(const Tensor&)> parameter;
  bool update_state = true;
};

// Runs `forward`'s nodes through the dispatcher (call_op), so that autograd records them and
// an installed hook (the tracer) sees them; returns the output node's values. Parameters that
// require grad are appended to `parameters_requiring_grad` when given.
std::vector<Tensor> replay(const Graph& forward, const std::vector<Tensor>& primals,
                           std::vector<Tensor>* parameters_requiring_grad = nullptr,
                           const ReplayHooks& hooks = {});

// Whether compiling `forward` for these inputs needs the joint graph: grad mode is on and an
// input or a captured parameter requires grad.
bool needs_joint_graph(const Graph& forward, const std::vector<Tensor>& inputs);

}  // namespace coil::aot
