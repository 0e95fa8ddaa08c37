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
    const bool view_op = op_info(op).kind == OpKind::View;
    for_each_tensor(args, [&](const Tensor& t) {
      next_edges.push_back(needs_grad(t) ? gradient_edge(t) : Edge{});
      input_metas_.push_back(meta_of(t));
      // A view op's rule reads its input's sizes and strides only: it keeps an alias without
      // history, so that a base whose history a write through the view rewrites is not held by
      // a node of that very history.
      saved_inputs_.emplace_back(view_op && t.defined() ? t.detach() : t, false);
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
    std::vector<bool> flowed;
    for (size_t i = 0; i < grads.size(); ++i) {
      flowed.push_back(grads[i].defined());
      if (!grads[i].defined())
        grads[i] = zeros(output_metas[i].sizes, output_metas[i].dtype, output_metas[i].device);
    }
    std::vector<bool> needed;
    for (const Edge& e : next_edges) needed.push_back(e.valid());
    std::vector<Tensor> result(next_edges.size());
    Args a(args);
    std::vector<bool> modified_in, modified_out;
    // A view op's rule reads its input's sizes and strides, never its elements: writes through
    // the view (or into its base) after the forward do not matter to it.
    const bool reads_elements = op_info(op_).kind != OpKind::View;
    for (const SavedTensor& s : saved_inputs_)
      modified_in.push_back(reads_elements && s.modified());
    for (const SavedTensor& s : saved_outputs_) modified_out.push_back(s.modified());
    rule(GradCtx{op_, a, outputs, grads, flowed, needed, result, modified_in, modified_out});
    for (size_t i = 0; i < result.size(); ++i) {
      if (!needed[i]) {
        result[i] = Tensor();
        continue;
      }
      // The metas themselves: a check is no reason to specialise a dynamic capture.
      COIL_ASSERT(!result[i].defined() || result[i].impl()->meta.sizes == input_metas_[i].sizes,
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

namespace {

uint64_t history_version(const Tensor& t) {
  const AutogradMeta* m = autograd_meta(t);
  return m ? m->history_version : 0;
}

// A view of `base`'s current value: `origin`'s steps taken again (recorded when base needs grad).
Tensor view_again(const ViewOrigin& origin, const Tensor& base) {
  Tensor v = base;
  for (const ViewStep& step : origin.steps) v = apply_view(step, v);
  return v;
}

// A view whose base was written in place after the view's history was set takes its history
// again, from the base's (the view's data is the base's: only the graph is stale).
void refresh_view(const Tensor& t) {
  AutogradMeta* m = autograd_meta(t);
  if (!m || !m->view) return;
  std::shared_ptr<const ViewOrigin> origin = m->view;  // view_again makes new views, not of t
  COIL_CHECK(*origin->orphan_writes == m->orphan_writes_seen,
             "autograd: another view of the same tensor was changed in place after that tensor "
             "was freed, and this view (sizes ",
             shape_str(t.sizes()),
             ") cannot take the change into its history; keep the viewed tensor alive while its "
             "views are written, or clone() the views");
  std::shared_ptr<TensorImpl> base_impl = origin->base.lock();
  if (!base_impl) return;
  Tensor base(base_impl);
  const uint64_t base_version = history_version(base);
  if (m->view_base_version == base_version) return;
  Tensor again = view_again(*origin, base);
  m->view_base_version = base_version;
  if (const AutogradMeta* am = autograd_meta(again); am && am->grad_fn) {
    set_history(t, am->grad_fn, am->output_nr);
  } else if (!t.is_leaf()) {
    m->grad_fn = nullptr;
    t.impl()->requires_grad = false;
  }
}

// `self` (no longer a view in the history's sense) now holds `value`.
void take_history(const Tensor& self, const Tensor& value) {
  AutogradMeta* vm = autograd_meta(value);
  if (vm && vm->grad_fn) {
    set_history(self, vm->grad_fn, vm->output_nr);
    vm->grad_fn->on_rebase(self.impl());
  } else {
    // The new contents do not depend on anything that requires grad: self becomes constant.
    ensure_autograd_meta(self).grad_fn = nullptr;
    self.impl()->requires_grad = false;
  }
  ++ensure_autograd_meta(self).history_version;
}

}  // namespace

bool should_record(const std::vector<Arg>& args) {
  if (!grad_mode_enabled()) return false;
  bool any = false;
  for_each_tensor(args, [&](const Tensor& t) {
    refresh_view(t);
    any = any || needs_grad(t);
  });
  return any;
}

void note_views(OpId op, const std::vector<Arg>& args, const std::vector<Tensor>& outs) {
  if (!grad_mode_enabled()) return;
  const Tensor* in = std::get_if<Tensor>(&args.at(0));
  if (!in || !in->defined() || !in->is_floating_point()) return;
  const AutogradMeta* im = autograd_meta(*in);
  // A view of a view is a view of the same base, when that base still exists.
  const ViewOrigin* parent = im && im->view && !im->view->base.expired() ? im->view.get() : nullptr;
  Tensor base = parent ? Tensor(parent->base.lock()) : *in;
  AutogradMeta& bm = ensure_autograd_meta(base);
  if (!bm.orphan_writes) bm.orphan_writes = std::make_shared<uint64_t>(0);
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].is_same(*in) || !aliases_input(op, *in, outs[i])) continue;
    auto origin = std::make_shared<ViewOrigin>();
    origin->base = base.impl_ptr();
    origin->orphan_writes = bm.orphan_writes;
    if (parent) origin->steps = parent->steps;
    ViewStep step{op, args, static_cast<int64_t>(i)};
    step.args[0] = Tensor();
    origin->steps.push_back(std::move(step));
    AutogradMeta& m = ensure_autograd_meta(outs[i]);
    m.view = std::move(origin);
    m.view_base_version = bm.history_version;
    m.orphan_writes_seen = *bm.orphan_writes;
  }
}

std::vector<Tensor> call_recording(OpId op, std::vector<Arg>& args) {
  if (CompositeFn composite = find_autograd_composite(op, Args(args))) {
    run_meta(op, args);  // the op's own checks and errors, before its parts run
    // Its parts are code like the program's: a size it reads as a number specialises.
    ProgramScope program;
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
  for (uint32_t i = 0; i < outs.size(); ++i)
    if (outs[i].is_floating_point()) set_history(outs[i], node, i);
  node->save_outputs(outs);
  return outs;
}

void rebase_history(const Tensor& self, const Tensor& value, const char* op) {
  if (!grad_mode_enabled()) return;
  AutogradMeta* sm = autograd_meta(self);
  // While capturing, the tracer functionalises writes into views itself.
  std::shared_ptr<const ViewOrigin> origin = sm && !current_dispatch_hook() ? sm->view : nullptr;
  std::shared_ptr<TensorImpl> base_impl = origin ? origin->base.lock() : nullptr;
  const bool base_needs_grad = base_impl && base_impl->requires_grad;
  if (!self.requires_grad() && !(value.defined() && value.requires_grad()) && !base_needs_grad)
    return;
  COIL_CHECK(!(self.is_leaf() && self.requires_grad()), op,
             ": a leaf tensor that requires grad (sizes ", shape_str(self.sizes()),
             ") cannot be changed in place while recording; do it under coil::NoGradGuard, or "
             "use the out-of-place op");
  if (origin && !base_impl) {
    // The base is gone: only the other views of it could see this write, and they are told
    // (refresh_view) rather than given a history that misses it.
    ++*origin->orphan_writes;
    sm->orphan_writes_seen = *origin->orphan_writes;
  }
  if (!base_impl) {
    take_history(self, value);
    return;
  }
  const Tensor base(base_impl);
  COIL_CHECK(!(base.is_leaf() && base.requires_grad()), op, ": the tensor (sizes ",
             shape_str(self.sizes()), ") is a view of a leaf tensor that requires grad (sizes ",
             shape_str(base.sizes()),
             "), which cannot be changed in place while recording; clone() the leaf first, or "
             "do it under coil::NoGradGuard");
  // The base's new value, out of place: its old value with the view's elements replaced, each
  // view step undone from the innermost out (recorded, so gradients reach both the old value
  // and `value`). The write itself still happens in place, after this. The old value is read
  // through a stand-in with the base's old history: the nodes that read it must not hold the
  // base itself, whose history they are about to become (a reference cycle).
  Tensor old = base.detach();
  if (const AutogradMeta* bm = autograd_meta(base); bm && bm->grad_fn)
    set_history(old, bm->grad_fn, bm->output_nr);
  std::vector<Tensor> inputs{old};
  for (size_t i = 0; i + 1 < origin->steps.size(); ++i)
    inputs.push_back(apply_view(origin->steps[i], inputs.back()));
  Tensor v = value.dtype() == self.dtype() ? value : value.to(self.dtype());
  for (size_t i = origin->steps.size(); i-- > 0;) v = scatter_view(origin->steps[i], inputs[i], v);
  take_history(base, v);
  // The view's own history: the view of the base's new value.
  Tensor again = view_again(*origin, v);
  take_history(self, again);
  ensure_autograd_meta(self).view_base_version = history_version(base);
}

namespace {
// The dispatcher calls this layer first for every op (graph/registry.h).
[[maybe_unused]] const bool installed =
    (install_autograd_layer({should_record, call_recording, note_views}), true);
}  // namespace

}  // namespace coil::autograd
