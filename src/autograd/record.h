// The autograd layer of the dispatcher: an op call with an input that requires grad (grad
// mode on) runs below autograd, then leaves a node on its outputs.
#pragma once

#include <vector>

#include "graph/registry.h"

namespace coil::autograd {

// Whether this call must be recorded: grad mode is on and a tensor argument requires grad.
bool should_record(const std::vector<Arg>& args);

// Runs the op (through the capture hook if one is installed, else eagerly) and records its
// grad_fn on the floating-point outputs. Ops whose gradient is simplest through their parts
// (dropout, attention, linear, ...) run as those parts instead, each part recorded.
std::vector<Tensor> call_recording(OpId op, std::vector<Arg>& args);

// In-place updates (Tensor::add_ and friends, copy_, fill_): `self` now holds `value`, which
// was computed out of place; `self` takes over value's history. A leaf that requires grad
// cannot be changed in place while grad mode is on (its gradient would be meaningless). When
// `self` is a view, its base takes the history of its old value with the view's elements
// replaced by `value` (computed out of place, recorded), and `self` that of the view of it.
void rebase_history(const Tensor& self, const Tensor& value, const char* op);

// After a view op ran (outside capture), in grad mode: remembers each output that aliases its
// floating-point input as a view of the input's base.
void note_views(OpId op, const std::vector<Arg>& args, const std::vector<Tensor>& outs);

// scaled_dot_product_attention's weights, softmax(q k^T * scale + mask) with its causal and
// boolean masks, written with coil ops (its composite form and its derivative rule share it).
Tensor attention_weights(const Args& args);

// An implicit composite: the op written with other ops, for autograd to record part by part.
using CompositeFn = std::vector<Tensor> (*)(const Args& args);
// The op's composite form under autograd, or nullptr (the op has a derivative rule of its own,
// or this call of it, such as dropout in eval mode, needs none).
CompositeFn find_autograd_composite(OpId op, const Args& args);

}  // namespace coil::autograd
