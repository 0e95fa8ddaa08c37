#include "aot/joint_graph.h"

#include <coil/autograd.h>
#include <coil/ops.h>

#include "capture/tracer.h"
#include "graph/autocast.h"
#include "graph/interpreter.h"

namespace coil::aot {

std::vector<Tensor> replay(const Graph& forward, const std::vector<Tensor>& primals,
                           std::vector<Tensor>* parameters_requiring_grad,
                           const ReplayHooks& hooks) {
  InterpretHooks through_dispatcher;
  through_dispatcher.check_inputs = false;
  through_dispatcher.call = [&](const Node& n, std::vector<Arg> args) {
    // batch_norm(input, weight, bias, running_mean, running_var, training, ...): in training
    // the result does not read the running statistics, which a replay must not update.
    if (!hooks.update_state && n.op() == OpId::batch_norm && Args(args).b(5))
      args[3] = args[4] = Arg{};
    return call_op(n.op(), std::move(args));
  };
  through_dispatcher.parameter = [&](const Node& n) {
    if (!n.value().requires_grad()) return n.value();
    if (parameters_requiring_grad) parameters_requiring_grad->push_back(n.value());
    return hooks.parameter ? hooks.parameter(n.value()) : n.value();
  };
  return interpret(forward, primals, through_dispatcher);
}

bool needs_joint_graph(const Graph& forward, const std::vector<Tensor>& inputs) {
  if (!grad_mode_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  for (const Node* n : forward.nodes())
    if (n->kind() == NodeKind::Parameter && n->value().requires_grad()) return true;
  return false;
}

JointGraph build_joint_graph(const Graph& forward, const std::vector<bool>& requires_grad,
                             size_t num_results) {
  AutocastOff explicit_casts;  // the forward's casts are in its graph; the backward's follow them
  CompileOptions options;
  options.name = "joint";
  options.fullgraph = true;  // nothing in a replay or a derivative rule reads data
  capture::Tracer tracer(options, [](std::shared_ptr<const Graph>) -> capture::CompiledGraph {
    COIL_ASSERT(false, "the joint graph's trace broke");
    return {};
  });
  JointGraph j;
  // A dynamic forward's joint graph is over the same symbols: it shares the env, and what the
  // derivative rules read or relate is guarded there too.
  const std::shared_ptr<ShapeEnv>& env = forward.shape_env();
  auto input = [&](const Tensor& m, const std::string& name, const SymLayout& layout) {
    return env ? tracer.input(m, name, layout, env) : tracer.input(m, name);
  };
  std::vector<Node*> placeholders = forward.placeholders();
  std::vector<Tensor> primals;
  for (size_t i = 0; i < placeholders.size(); ++i) {
    Tensor m = meta_tensor(placeholders[i]->tensor_meta());
    if (requires_grad.at(i)) m.requires_grad_();
    primals.push_back(
        input(m, placeholders[i]->name(), placeholders[i]->sym_layout(0, /*as_made=*/true)));
  }
  j.num_primals = primals.size();

  std::vector<Tensor> outputs, grads, parameters;
  {
    DispatchHookScope tracing(&tracer);
    EnableGradGuard grad_mode;
    outputs = replay(forward, primals, &parameters);
    j.num_forward_outputs = outputs.size();
    std::vector<Tensor> differentiable, tangents;
    for (size_t i = 0; i < std::min(num_results, outputs.size()); ++i) {
      if (!outputs[i].requires_grad()) continue;
      j.differentiable_outputs.push_back(i);
      differentiable.push_back(outputs[i]);
      tangents.push_back(input(meta_tensor(meta_of(outputs[i])),
                               "tangent_" + std::to_string(tangents.size()),
                               tracer.sym_layout(outputs[i])));
    }
    std::vector<Tensor> targets;
    for (size_t i = 0; i < primals.size(); ++i) {
      if (!requires_grad[i]) continue;
      targets.push_back(primals[i]);
      j.grad_targets.push_back({static_cast<int64_t>(i), {}});
    }
    for (const Tensor& p : parameters) {
      targets.push_back(p);
      j.grad_targets.push_back({-1, p});
    }
    if (!differentiable.empty() && !targets.empty()) {
      NoGradGuard backward_mode;  // the rules' own ops are traced, not differentiated again
      grads = autograd::grad(differentiable, targets, tangents, /*retain_graph=*/false,
                             /*create_graph=*/false, /*allow_unused=*/true);
    }
  }
  // A target the results do not depend on gets a zero gradient, as the graph must say.
  std::vector<Tensor> results = outputs;
  for (size_t i = 0; i < j.grad_targets.size(); ++i) {
    Tensor g = i < grads.size() ? grads[i] : Tensor();
    if (!g.defined()) {
      const JointGraph::GradTarget& t = j.grad_targets[i];
      const Tensor& target = t.primal >= 0 ? primals[static_cast<size_t>(t.primal)] : t.parameter;
      DispatchHookScope tracing(&tracer);
      g = zeros(target.sizes(), target.dtype(), target.device());
    }
    results.push_back(g);
  }
  std::vector<capture::Mutation> mutations;
  j.graph = tracer.finish(results, mutations);
  COIL_ASSERT(j.graph && mutations.empty(), "the joint graph recorded in-place updates");
  return j;
}

}  // namespace coil::aot
