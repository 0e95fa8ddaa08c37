// Derivative rules, one per differentiable registry op: given the op's arguments, its outputs
// and the gradients of its outputs, the gradients of its tensor inputs. Rules are written with
// coil's public ops, so the same rule runs eagerly (backward()), records its own graph
// (create_graph) and, under capture, becomes the backward half of a joint graph.
#pragma once

#include <vector>

#include "graph/arg.h"
#include "graph/registry.h"

namespace coil::autograd {

struct GradCtx {
  OpId op;
  const Args& args;                    // as called (tensors unpacked from the saved ones)
  const std::vector<Tensor>& outputs;  // as computed
  const std::vector<Tensor>& grads;    // one per output; zeros where none flowed back
  const std::vector<bool>& flowed;     // per output: whether a gradient flowed back into it
  const std::vector<bool>& needed;     // per flattened tensor input: is its gradient wanted?
  std::vector<Tensor>& result;         // per flattened tensor input: what the rule computed
  // Saved tensors changed in place since the forward: reading one is an error.
  const std::vector<bool>& modified_inputs;  // per flattened tensor input
  const std::vector<bool>& modified_outputs;

  const Tensor& grad() const { return grads.at(0); }
  // The saved output / argument `i`; throws if an in-place op has changed it since.
  const Tensor& out(size_t i = 0) const;
  const Tensor& in(size_t i) const;
  // Whether argument `i` holds a tensor (not a plain number or None) whose gradient is wanted.
  bool wants(size_t i) const;
  // The gradient of argument `i` (a single tensor), brought to its dtype and sizes.
  void set(size_t i, const Tensor& g) const;
  // The gradients of the elements of list argument `i`.
  void set_list(size_t i, const std::vector<Tensor>& gs) const;
  // The flattened position of argument `i`'s first tensor, or -1 when it holds none.
  int flat_index(size_t i) const;
};

// Writes the gradients of the tensor inputs the ctx wants (ctx.set / ctx.set_list).
using DerivativeFn = void (*)(const GradCtx& ctx);

// The op's rule, or nullptr when the op has none (backward through it is an error).
DerivativeFn find_derivative(OpId op);

// `g` summed over the dims broadcasting added or expanded so that it has `sizes`.
Tensor sum_to(const Tensor& g, const SymInts& sizes);
// A size as a 0-dim tensor of `like`'s dtype and device (symbolic in a dynamic capture): what
// a mean's gradient divides by.
Tensor size_scalar(const SymInt& n, const Tensor& like);
// `g` in the dtype and sizes of `input` (sum_to, then a cast).
Tensor grad_like(const Tensor& g, const Tensor& input);

// The rule tables of each family (derivatives_<family>.cpp), merged by find_derivative.
struct RuleEntry {
  OpId op;
  DerivativeFn fn;
};
std::vector<RuleEntry> pointwise_rules();
std::vector<RuleEntry> reduction_rules();
std::vector<RuleEntry> nn_rules();
std::vector<RuleEntry> shape_rules();
std::vector<RuleEntry> conv_pool_rules();

}  // namespace coil::autograd
