// In-place updates of views, functionalised. A captured graph has no aliasing: when the user
// writes into a view (`x.slice(1, 0, 2).add_(1)`), the tracer instead computes a new value
// for the view's base, its old value with the view's elements replaced, and every view of
// that base is taken again from the new value when next read (as PyTorch's functionalization).
//
// A view is its base plus the view ops that lead from it; each op knows how to take itself
// again (apply) and how to put a new value for its elements back into its input (scatter).
// Both are written with public ops, so they record graph nodes during capture and compute
// eagerly otherwise.
#pragma once

#include <vector>

#include "graph/arg.h"
#include "graph/registry.h"

namespace coil {

struct ViewStep {
  OpId op;
  std::vector<Arg> args;  // as called; args[0], the input, is replaced on each use
  int64_t item = 0;       // which output, for the splitting ops
};

// Whether `op`'s output `out` is a view of its input (reshape and flatten copy when the
// input's layout cannot be viewed with the new shape).
bool aliases_input(OpId op, const Tensor& input, const Tensor& out);

// The view `step` takes of `input`.
Tensor apply_view(const ViewStep& step, const Tensor& input);
// `input` with the elements `step`'s view selects replaced by `value` (the view's sizes and
// `input`'s dtype). A coil::Error for views that cannot be written (expand, as_strided).
Tensor scatter_view(const ViewStep& step, const Tensor& input, const Tensor& value);

}  // namespace coil
