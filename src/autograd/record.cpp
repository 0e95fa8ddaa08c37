// Recording: the node an op call leaves behind, and how it runs its derivative rule.
#include "autograd/record.h"

#include <coil/autograd.h>
#include <coil/ops.h>

#include "autograd/derivatives.h"
#include "autograd/node.h"

namespace coil::autograd {

namespace {

template <typename F>
void for_each_tensor(const std::vector<Arg>& args, F&& f) {
  for (const Arg& a : args) {
    if (const Tensor* t = std::get_if<Tensor>(&a)) {
      f(*t);
    } else if (const auto* ts = std::get_if<std::vector<Tensor>>(&a)) {
      for (const Tensor& e : *ts) f(e);
    }
  }
}

// "mul" -> "MulBackward", as PyTorch names its nodes.
std::string backward_name(OpId op) {
  std::string name;
  bool upper = true;
  for (const char* c = op_name(op); *c; ++c) {
    if (*c == '_') {
      upper = true;
      continue;
    }
    name += upper ? static_cast<char>(std::toupper(*c)) : *c;
    upper = false;
  }
  return name + "Backward";
}

// The grad_fn of one op call: its arguments with the tensors saved, its saved outputs, and its
// derivative rule.
class OpNode : public Node {
 public:
  OpNode(OpId op, const std::vector<Arg>& args) : op_(op), args_(args) {
    for_each_tensor(args, [&](const Tensor& t) {
      next_edges.push_back(needs_grad(t) ? gradient_edge(t) : Edge{});
      input_metas_.push_back(meta_of(t));
      saved_inputs_.emplace_back(t, false);
    });
    // The saved copies stand in for the tensors: the arguments keep only the rest.
    for (Arg& a : args_) {
      if (std::holds_alternative<Tensor>(a)) a = Tensor();
      if (auto* ts = std::get_if<std::vector<Tensor>>(&a)) *ts = std::vector<Tensor>(ts->size());
    }
  }

  void save_outputs(const std::vector<Tensor>& outs) {
    for (const Tensor& t : outs) {
      output_metas.push_back(meta_of(t));
      saved_outputs_.emplace_back(t, true);
    }
  }

  std::string name() const override { return backward_name(op_); }

  void on_rebase(const TensorImpl* impl) override {
    for (SavedTensor& s : saved_inputs_) s.detach_if(impl);
  }

  void release_saved() override {
    for (SavedTensor& s : saved_inputs_) s.release();
    for (SavedTensor& s : saved_outputs_) s.release();
  }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    DerivativeFn rule = find_derivative(op_);
    COIL_CHECK(rule, "backward: the derivative of ", op_name(op_),
               " is not implemented yet, so no gradient can flow through it to its inputs "
               "(sizes ",
               shape_str(input_metas_.empty() ? Shape{} : input_metas_[0].sizes),
               "); compute it under coil::NoGradGuard or detach() its inputs");
    std::vector<Arg> args = args_;
    size_t k = 0;
    for (Arg& a : args) {
      if (std::holds_alternative<Tensor>(a)) a = saved_inputs_[k++].unpack(op_name(op_));
      if (auto* ts = std::get_if<std::vector<Tensor>>(&a))
        for (Tensor& t : *ts) t = saved_inputs_[k++].unpack(op_name(op_));
    }
    std::vector<Tensor> outputs;
    for (const SavedTensor& s : saved_outputs_) outputs.push_back(s.unpack(op_name(op_)));
    for (size_t i = 0; i < grads.size(); ++i)
      if (!grads[i].defined()) grads[i] = zeros(output_metas[i].sizes, output_metas[i].dtype);
    std::vector<bool> needed;
    for (const Edge& e : next_edges) needed.push_back(e.valid());
    std::vector<Tensor> result(next_edges.size());
    Args a(args);
    std::vector<bool> modified_in, modified_out;
    for (const SavedTensor& s : saved_inputs_) modified_in.push_back(s.modified());
    for (const SavedTensor& s : saved_outputs_) modified_out.push_back(s.modified());
    rule(GradCtx{op_, a, outputs, grads, needed, result, modified_in, modified_out});
    for (size_t i = 0; i < result.size(); ++i) {
      if (!needed[i]) {
        result[i] = Tensor();
        continue;
      }
      COIL_ASSERT(!result[i].defined() || result[i].sizes() == input_metas_[i].sizes,
                  "the derivative of ", op_name(op_), " gave input ", i, " a gradient of sizes ",
                  shape_str(result[i].sizes()), " for an input of sizes ",
                  shape_str(input_metas_[i].sizes));
    }
    return result;
  }

 private:
  OpId op_;
  std::vector<Arg> args_;
  std::vector<TensorMeta> input_metas_;
  std::vector<SavedTensor> saved_inputs_;
  std::vector<SavedTensor> saved_outputs_;
};

}  // namespace

bool should_record(const std::vector<Arg>& args) {
  if (!grad_mode_enabled()) return false;
  bool any = false;
  for_each_tensor(args, [&](const Tensor& t) { any = any || needs_grad(t); });
  return any;
}

std::vector<Tensor> call_recording(OpId op, std::vector<Arg>& args) {
  if (CompositeFn composite = find_autograd_composite(op, Args(args))) {
    run_meta(op, args);  // the op's own checks and errors, before its parts run
    return composite(Args(args));
  }
  std::vector<Tensor> outs = call_below_autograd(op, args);
  bool differentiable = false;
  for (const Tensor& t : outs) differentiable = differentiable || t.is_floating_point();
  if (!differentiable) return outs;  // comparisons, argmax, indices: nothing flows back
  // An op may hand back an input itself (contiguous of a contiguous tensor): the output gets
  // its own handle, so that recording its history leaves the input's alone.
  for (Tensor& out : outs) {
    bool is_input = false;
    for_each_tensor(args, [&](const Tensor& t) { is_input = is_input || t.is_same(out); });
    if (is_input) out = out.detach();
  }
  auto node = std::make_shared<OpNode>(op, args);
  node->sequence_nr = next_sequence_nr();
  const bool view = op_info(op).kind == OpKind::View;
  for (uint32_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].is_floating_point()) continue;
    set_history(outs[i], node, i);
    ensure_autograd_meta(outs[i]).is_view = view;
  }
  node->save_outputs(outs);
  return outs;
}

void rebase_history(const Tensor& self, const Tensor& value, const char* op) {
  if (!grad_mode_enabled()) return;
  if (!self.requires_grad() && !(value.defined() && value.requires_grad())) return;
  COIL_CHECK(!(self.is_leaf() && self.requires_grad()), op,
             ": a leaf tensor that requires grad (sizes ", shape_str(self.sizes()),
             ") cannot be changed in place while recording; do it under coil::NoGradGuard, or "
             "use the out-of-place op");
  // The base a view shares its storage with would need its history rewritten too (PyTorch's
  // view + in-place rebase); coil does not do that yet, so it refuses rather than give a
  // wrong gradient.
  const AutogradMeta* sm = autograd_meta(self);
  COIL_CHECK(!(sm && sm->is_view), op, ": the tensor (sizes ", shape_str(self.sizes()),
             ") is a view of another tensor that requires grad, and coil's autograd cannot "
             "update a view in place yet; clone() the view first, or use the out-of-place op");
  AutogradMeta* vm = autograd_meta(value);
  if (vm && vm->grad_fn) {
    set_history(self, vm->grad_fn, vm->output_nr);
    vm->grad_fn->on_rebase(self.impl());
  } else {
    // The new contents do not depend on anything that requires grad: self becomes constant.
    ensure_autograd_meta(self).grad_fn = nullptr;
    self.impl()->requires_grad = false;
  }
}

}  // namespace coil::autograd
