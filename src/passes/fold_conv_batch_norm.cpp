// Freezing's batch-norm folding (Inductor's conv-bn folding under
// torch._inductor.config.freezing): batch_norm in inference over a convolution whose weights
// are captured tensors is an affine map per output channel, which the convolution's weights and
// bias absorb. The folded weights are computed here, at compile time, from the parameters'
// values then: the program promises, by asking for freezing, not to change them afterwards.
#include <coil/autograd.h>
#include <coil/ops.h>

#include "passes/pass_util.h"
#include "passes/passes.h"

namespace coil {

namespace {

// The captured tensor an argument holds (a parameter or a constant); undefined for None, and
// nullopt when it is computed by the program.
std::optional<Tensor> captured(const NodeArg& a) {
  if (std::holds_alternative<std::monostate>(a)) return Tensor();
  const Node* n = node_arg(a);
  if (!n || (n->kind() != NodeKind::Parameter && n->kind() != NodeKind::Constant))
    return std::nullopt;
  return n->value();
}

// conv2d(x, w, b, ...) -> batch_norm(that, gamma, beta, mean, var, training=false, ., eps):
// conv2d(x, w * s, (b - mean) * s + beta, ...) with s = gamma / sqrt(var + eps) per channel.
bool fold(Graph& g, Node* bn) {
  const std::vector<NodeArg>& a = bn->args();
  Node* conv = node_arg(a[0]);
  const bool* training = std::get_if<bool>(&a[5]);
  const double* eps = std::get_if<double>(&a[7]);
  if (!conv || conv->kind() != NodeKind::Call || conv->op() != OpId::conv2d ||
      conv->users().size() != 1 || !training || *training || !eps)
    return false;
  std::optional<Tensor> gamma = captured(a[1]), beta = captured(a[2]), mean = captured(a[3]),
                        var = captured(a[4]);
  std::vector<NodeArg> conv_args = conv->args();
  std::optional<Tensor> w = captured(conv_args[1]), b = captured(conv_args[2]);
  if (!gamma || !beta || !mean || !var || !w || !b || !mean->defined() || !var->defined())
    return false;
  const DType dtype = w->dtype();
  if (!is_floating(dtype) || conv->tensor_meta().dtype != bn->tensor_meta().dtype) return false;

  NoGradGuard no_grad;
  auto f64 = [](const Tensor& t) { return t.to(kFloat64); };
  Tensor s = (f64(*var) + *eps).rsqrt();
  if (gamma->defined()) s = s * f64(*gamma);
  Tensor shift = (b->defined() ? f64(*b) : zeros_like(f64(*mean))) - f64(*mean);
  shift = shift * s;
  if (beta->defined()) shift = shift + f64(*beta);
  const int64_t out_channels = w->size(0);
  Tensor folded_w = (f64(*w) * s.reshape({out_channels, 1, 1, 1})).to(dtype).contiguous();
  Tensor folded_b = shift.to(dtype).contiguous();

  conv_args[1] = g.parameter("frozen_" + conv->name() + "_weight", folded_w, conv);
  conv_args[2] = g.parameter("frozen_" + conv->name() + "_bias", folded_b, conv);
  Node* fused = g.call(OpId::conv2d, conv_args, bn);
  detail_passes::replace_with_new(g, bn, fused);
  return true;
}

}  // namespace

bool run_fold_conv_batch_norm(Graph& g) {
  bool changed = false;
  for (Node* n : g.nodes())
    if (n->kind() == NodeKind::Call && n->op() == OpId::batch_norm && fold(g, n)) changed = true;
  return changed;
}

}  // namespace coil
