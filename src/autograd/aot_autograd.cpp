#include "autograd/aot_autograd.h"

#include <coil/autograd.h>
#include <coil/ops.h>

#include "autograd/joint_graph.h"
#include "autograd/node.h"
#include "autograd/partitioner.h"
#include "capture/counters.h"
#include "compile_fx.h"
#include "debug/log.h"
#include "graph/printer.h"

namespace coil::autograd {

namespace {

// The grad_fn of a compiled forward's results: runs the compiled backward on the values the
// forward saved and the results' gradients.
class CompiledBackward : public Node {
 public:
  CompiledBackward(std::shared_ptr<const capture::CompiledGraph> backward,
                   std::vector<Tensor> saved)
      : backward_(std::move(backward)), saved_(std::move(saved)) {}
  std::string name() const override { return "CompiledFunctionBackward"; }
  void release_saved() override {
    saved_.clear();
    released_ = true;
  }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    COIL_CHECK(!released_,
               "backward through a compiled function: its saved tensors were freed "
               "by an earlier backward; pass retain_graph=true to the first backward() to run "
               "backward twice through the same graph");
    std::vector<Tensor> in = saved_;
    for (size_t i = 0; i < grads.size(); ++i) {
      const TensorMeta& m = output_metas[i];
      Tensor g = grads[i].defined() ? grads[i] : zeros(m.sizes, m.dtype);
      in.push_back(g.dtype() == m.dtype ? g : g.to(m.dtype));
    }
    return backward_->run(in);
  }

 private:
  std::shared_ptr<const capture::CompiledGraph> backward_;
  std::vector<Tensor> saved_;
  bool released_ = false;
};

}  // namespace

capture::CompiledGraph compile_training(std::shared_ptr<const Graph> graph,
                                        const CompileOptions& options, debug::CompileTrace& trace,
                                        const std::vector<Tensor>& inputs, size_t num_results) {
  const std::string& prefix = trace.log_prefix();
  auto start = debug::Clock::now();
  std::vector<bool> requires_grad;
  for (const Tensor& t : inputs) requires_grad.push_back(t.requires_grad());
  JointGraph joint = build_joint_graph(*graph, requires_grad, num_results);
  debug::log("aot_graphs", prefix, "joint graph:\n" + print_graph(*joint.graph));
  Partition part = partition(joint);
  debug::log("partitioner", prefix, part.report());
  capture::bump(capture::Counter::saved_bytes, part.saved_bytes);
  capture::bump(capture::Counter::save_all_bytes, part.save_everything_bytes);
  debug::log("aot_graphs", prefix, "forward graph:\n" + print_graph(*part.forward));
  debug::log("aot_graphs", prefix, "backward graph:\n" + print_graph(*part.backward));
  trace.timeline().add("autograd", "joint graph + partition", start, debug::Clock::now() - start);
  trace.write("joint_graph.txt", [&] { return print_graph(*joint.graph); });
  trace.write("partition.txt", [&] { return part.report(); });

  capture::CompiledGraph forward = compile_fx(part.forward, options, prefix + "_forward");
  auto backward = std::make_shared<const capture::CompiledGraph>(
      compile_fx(part.backward, options, prefix + "_backward"));
  trace.finish("a forward and a backward graph");

  const size_t num_outputs = joint.num_forward_outputs, num_saved = part.num_saved;
  auto run = [forward, backward, joint, num_outputs, num_saved](const std::vector<Tensor>& in) {
    std::vector<Tensor> outs = forward.run(in);
    COIL_ASSERT(outs.size() == num_outputs + num_saved, "the compiled forward returned ",
                outs.size(), " values");
    // Detached aliases: a saved value that is also a result must not hold the result (whose
    // grad_fn holds the saved values) alive.
    std::vector<Tensor> saved;
    for (size_t i = num_outputs; i < outs.size(); ++i) saved.push_back(outs[i].detach());
    outs.resize(num_outputs);
    if (!grad_mode_enabled()) return outs;
    auto node = std::make_shared<CompiledBackward>(backward, std::move(saved));
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

}  // namespace coil::autograd
