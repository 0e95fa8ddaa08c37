#include "aot/aot_autograd.h"

#include <coil/autograd.h>
#include <coil/ops.h>

#include "aot/joint_graph.h"
#include "autograd/node.h"
#include "aot/partitioner.h"

namespace coil::aot {

namespace {

using autograd::Edge;
using autograd::gradient_edge;
using autograd::needs_grad;
using autograd::next_sequence_nr;
using autograd::SavedTensor;
using autograd::set_history;

// What a second derivative through a compiled function needs: its compiled backward is code,
// not recorded ops, so under create_graph the captured forward is replayed through eager
// autograd on the call's inputs and differentiated there (with the same derivative rules the
// joint graph was traced with).
struct EagerReplay {
  std::shared_ptr<const Graph> forward;
  std::string function;  // how errors name the compiled function
  std::vector<size_t> differentiable_outputs;
  std::vector<JointGraph::GradTarget> grad_targets;
  // Non-empty when the forward draws random numbers (the op's name): a replay would draw
  // different ones.
  std::string random_op;
};

// The op of `forward` whose values a second run would not reproduce, or "".
std::string random_op_of(const Graph& forward) {
  for (const coil::Node* n : forward.nodes()) {
    if (n->kind() != NodeKind::Call) continue;
    const OpId op = n->op();
    if (op == OpId::rand || op == OpId::randn || op == OpId::randint)
      return std::string(op_name(op)) + ", as training dropout does";
    const auto& args = n->args();
    auto number = [&](size_t i) {
      const auto* d = std::get_if<double>(&args.at(i));
      return d ? *d : 0.0;
    };
    if (op == OpId::dropout && number(1) > 0 && std::get_if<bool>(&args.at(2)) &&
        std::get<bool>(args.at(2)))
      return "dropout";
    if (op == OpId::scaled_dot_product_attention && number(4) > 0)
      return "scaled_dot_product_attention with dropout_p > 0";
  }
  return "";
}

// Stands for an input (or a parameter) in an eager replay: passes the gradient the replay gives
// it on to where the compiled function sends that input's gradient. Each input gets its own,
// so that its gradient is its own, not one that also flowed through another input.
class ReplayInput : public autograd::Node {
 public:
  ReplayInput(Edge to, const TensorMeta& meta) {
    next_edges.push_back(std::move(to));
    output_metas.push_back(meta);
    sequence_nr = next_sequence_nr();
  }
  std::string name() const override { return "CompiledFunctionInput"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override { return std::move(grads); }
};

// `value` (detached) as the output of a ReplayInput sending its gradient to `to`.
Tensor replay_input(const Tensor& value, const Edge& to) {
  Tensor t = value.detach();
  set_history(t, std::make_shared<ReplayInput>(to, meta_of(t)), 0);
  return t;
}

// The grad_fn of a compiled forward's results: runs the compiled backward on the values the
// forward saved and the results' gradients; under create_graph, the eager replay instead.
class CompiledBackward : public autograd::Node {
 public:
  CompiledBackward(std::shared_ptr<const capture::CompiledGraph> backward,
                   std::vector<Tensor> saved, std::shared_ptr<const EagerReplay> replay,
                   const std::vector<Tensor>& inputs)
      : backward_(std::move(backward)), saved_(std::move(saved)), replay_(std::move(replay)) {
    // Detached: the inputs' histories are reached through next_edges (holding the tensors
    // themselves could make a cycle through an input this call's results were copied into).
    for (const Tensor& t : inputs) inputs_.emplace_back(t.defined() ? t.detach() : t, false);
  }
  std::string name() const override { return "CompiledFunctionBackward"; }
  void release_saved() override {
    saved_.clear();
    for (SavedTensor& t : inputs_) t.release();
    released_ = true;
  }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    COIL_CHECK(!released_,
               "backward through a compiled function: its saved tensors were freed "
               "by an earlier backward; pass retain_graph=true to the first backward() to run "
               "backward twice through the same graph");
    // The engine records a backward exactly when create_graph is set.
    if (grad_mode_enabled()) return apply_eagerly(grads);
    std::vector<Tensor> in = saved_;
    for (size_t i = 0; i < grads.size(); ++i) {
      const TensorMeta& m = output_metas[i];
      Tensor g = grads[i].defined() ? grads[i] : zeros(m.sizes, m.dtype, m.device);
      in.push_back(g.dtype() == m.dtype ? g : g.to(m.dtype));
    }
    return backward_->run(in);
  }

 private:
  // The gradients of the inputs and parameters, recorded so that they can be differentiated
  // again: the forward replayed through eager autograd on the call's input values, then
  // autograd::grad on the replay with create_graph.
  std::vector<Tensor> apply_eagerly(const std::vector<Tensor>& grads) {
    const EagerReplay& r = *replay_;
    COIL_CHECK(r.random_op.empty(), "double backward through compiled function '", r.function,
               "': its forward draws random numbers (", r.random_op,
               "), which a second derivative would have to draw again; call the function "
               "without coil::compile (or set COIL_DISABLE=1) to take higher-order gradients");
    const size_t num_targets = std::min(r.grad_targets.size(), next_edges.size());
    std::vector<Tensor> primals, targets;
    std::vector<size_t> target_of;  // the next edge each target's gradient goes to
    for (size_t i = 0; i < inputs_.size(); ++i) {
      COIL_CHECK(!inputs_[i].modified(), "double backward through compiled function '", r.function,
                 "': its input ", i,
                 " was modified in place after the call, and a "
                 "second derivative reads its value at the call; clone() it before changing it, "
                 "or call the function without coil::compile");
      Tensor t = inputs_[i].unpack("a compiled function");
      for (size_t k = 0; k < num_targets; ++k)
        if (r.grad_targets[k].primal == static_cast<int64_t>(i) && next_edges[k].valid()) {
          t = replay_input(t, next_edges[k]);
          targets.push_back(t);
          target_of.push_back(k);
          break;
        }
      primals.push_back(t);
    }
    std::vector<bool> taken(num_targets, false);
    ReplayHooks hooks;
    hooks.update_state = false;
    hooks.parameter = [&](const Tensor& p) {
      for (size_t k = 0; k < num_targets; ++k) {
        const JointGraph::GradTarget& t = r.grad_targets[k];
        if (t.primal >= 0 || taken[k] || !t.parameter.is_same(p)) continue;
        taken[k] = true;
        if (!next_edges[k].valid()) break;
        targets.push_back(replay_input(p, next_edges[k]));
        target_of.push_back(k);
        return targets.back();
      }
      return p;
    };
    std::vector<Tensor> outs = replay(*r.forward, primals, nullptr, hooks);

    std::vector<Tensor> roots, root_grads;
    for (size_t k = 0; k < r.differentiable_outputs.size() && k < grads.size(); ++k) {
      const Tensor& out = outs.at(r.differentiable_outputs[k]);
      if (!grads[k].defined() || !out.requires_grad()) continue;
      roots.push_back(out);
      root_grads.push_back(grads[k].dtype() == out.dtype() ? grads[k] : grads[k].to(out.dtype()));
    }
    std::vector<Tensor> result(next_edges.size());
    if (roots.empty() || targets.empty()) return result;
    std::vector<Tensor> g = autograd::grad(roots, targets, root_grads, /*retain_graph=*/true,
                                           /*create_graph=*/true, /*allow_unused=*/true);
    for (size_t k = 0; k < g.size(); ++k) result[target_of[k]] = g[k];
    return result;
  }

  std::shared_ptr<const capture::CompiledGraph> backward_;
  std::vector<Tensor> saved_;
  std::shared_ptr<const EagerReplay> replay_;
  std::vector<SavedTensor> inputs_;  // the call's input values, for the replay
  bool released_ = false;
};

}  // namespace

capture::CompiledGraph training_function(std::shared_ptr<const Graph> graph,
                                         const CompileOptions& options, const JointGraph& joint,
                                         const Partition& part, capture::CompiledGraph forward,
                                         capture::CompiledGraph compiled_backward) {
  auto backward = std::make_shared<const capture::CompiledGraph>(std::move(compiled_backward));
  auto replay_info = std::make_shared<EagerReplay>();
  replay_info->forward = graph;
  replay_info->function = options.name;
  replay_info->differentiable_outputs = joint.differentiable_outputs;
  replay_info->grad_targets = joint.grad_targets;
  replay_info->random_op = random_op_of(*graph);
  std::shared_ptr<const EagerReplay> eager_replay = std::move(replay_info);

  const size_t num_outputs = joint.num_forward_outputs, num_saved = part.num_saved;
  auto run = [forward, backward, joint, num_outputs, num_saved,
              eager_replay](const std::vector<Tensor>& in) {
    std::vector<Tensor> outs = forward.run(in);
    COIL_ASSERT(outs.size() == num_outputs + num_saved, "the compiled forward returned ",
                outs.size(), " values");
    // Detached aliases: a saved value that is also a result must not hold the result (whose
    // grad_fn holds the saved values) alive.
    std::vector<Tensor> saved;
    for (size_t i = num_outputs; i < outs.size(); ++i) saved.push_back(outs[i].detach());
    outs.resize(num_outputs);
    if (!grad_mode_enabled()) return outs;
    auto node = std::make_shared<CompiledBackward>(backward, std::move(saved), eager_replay, in);
    node->sequence_nr = next_sequence_nr();
    for (const JointGraph::GradTarget& t : joint.grad_targets) {
      const Tensor& target = t.primal >= 0 ? in[static_cast<size_t>(t.primal)] : t.parameter;
      node->next_edges.push_back(needs_grad(target) ? gradient_edge(target) : Edge{});
    }
    for (size_t k = 0; k < joint.differentiable_outputs.size(); ++k) {
      Tensor& out = outs[joint.differentiable_outputs[k]];
      node->output_metas.push_back(meta_of(out));
      // A result that is an input, or another result, gets its own handle for its history.
      bool shared = false;
      for (const Tensor& t : in) shared = shared || t.is_same(out);
      for (size_t j = 0; j < k; ++j)
        shared = shared || outs[joint.differentiable_outputs[j]].is_same(out);
      if (shared) out = out.detach();
      set_history(out, node, static_cast<uint32_t>(k));
    }
    return outs;
  };
  return {graph, run};
}

capture::CompiledGraph eager_autograd_graph(std::shared_ptr<const Graph> graph) {
  return {graph, [graph](const std::vector<Tensor>& in) { return replay(*graph, in); }};
}

}  // namespace coil::aot
