// The rule table and the helpers every rule shares.
#include "autograd/derivatives.h"
#include "graph/sym_node.h"

#include <coil/ops.h>

#include <array>

namespace coil::autograd {

int GradCtx::flat_index(size_t i) const {
  int k = 0;
  for (size_t j = 0; j < args.size(); ++j) {
    const Arg& a = args[j];
    const bool single = std::holds_alternative<Tensor>(a);
    const auto* list = std::get_if<std::vector<Tensor>>(&a);
    if (j == i) return single || (list && !list->empty()) ? k : -1;
    if (single) ++k;
    if (list) k += static_cast<int>(list->size());
  }
  return -1;
}

bool GradCtx::wants(size_t i) const {
  const int k = flat_index(i);
  return k >= 0 && needed[k];
}

namespace {
[[noreturn]] void modified_error(OpId op, const Tensor& t) {
  throw Error(detail::str_cat(
      "backward through ", op_name(op), ": a tensor of sizes ", shape_str(t.sizes()),
      " that it saved for the backward pass was modified by an in-place operation afterwards; "
      "use the out-of-place op, or clone() the tensor before changing it"));
}
}  // namespace

const Tensor& GradCtx::in(size_t i) const {
  const int k = flat_index(i);
  const Tensor& t = args.tensor(i);
  if (k >= 0 && modified_inputs[k]) modified_error(op, t);
  return t;
}

const Tensor& GradCtx::out(size_t i) const {
  if (modified_outputs.at(i)) modified_error(op, outputs[i]);
  return outputs[i];
}

void GradCtx::set(size_t i, const Tensor& g) const {
  const int k = flat_index(i);
  if (k < 0 || !needed[k]) return;
  result[k] = grad_like(g, args.tensor(i));
}

void GradCtx::set_list(size_t i, const std::vector<Tensor>& gs) const {
  const int k = flat_index(i);
  if (k < 0) return;
  const auto& list = args.tensors(i);
  for (size_t j = 0; j < gs.size(); ++j)
    if (needed[k + j] && gs[j].defined()) result[k + j] = grad_like(gs[j], list[j]);
}

// Sizes compared as they are written (a symbolic size is never 1): no guard.
Tensor sum_to(const Tensor& g, const SymInts& sizes) {
  const SymInts have = g.sym_sizes();
  auto one = [](const SymInt& s) { return !s.is_symbolic() && s.hint() == 1; };
  if (have.size() == sizes.size()) {
    bool same = true;
    for (size_t d = 0; d < sizes.size(); ++d) same = same && same_symint(have[d], sizes[d]);
    if (same) return g;
  }
  const int64_t lead = g.dim() - static_cast<int64_t>(sizes.size());
  COIL_ASSERT(lead >= 0, "sum_to: gradient of sizes ", shape_str(hints_of(have)),
              " cannot reduce to ", shape_str(hints_of(sizes)));
  Shape dims;
  for (int64_t d = 0; d < g.dim(); ++d)
    if (d < lead || (one(sizes[d - lead]) && !one(have[d]))) dims.push_back(d);
  Tensor r = dims.empty() ? g : sum(g, dims, /*keepdim=*/true);
  return r.reshape_symint(sizes);
}

Tensor size_scalar(const SymInt& n, const Tensor& like) {
  return call_op1(OpId::full, {Shape{}, symint_arg(n), like.dtype(), like.device()});
}

Tensor grad_like(const Tensor& g, const Tensor& input) {
  Tensor r = sum_to(g, input.sym_sizes());
  return r.dtype() == input.dtype() ? r : r.to(input.dtype());
}

DerivativeFn find_derivative(OpId op) {
  static const std::array<DerivativeFn, kNumOps> table = [] {
    std::array<DerivativeFn, kNumOps> t{};
    for (auto rules : {pointwise_rules, reduction_rules, nn_rules, shape_rules, conv_pool_rules})
      for (const RuleEntry& e : rules()) t[static_cast<size_t>(e.op)] = e.fn;
    return t;
  }();
  return table[static_cast<size_t>(op)];
}

}  // namespace coil::autograd
