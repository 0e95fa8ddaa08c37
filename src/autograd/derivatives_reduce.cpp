// Derivatives of the reductions and scans: the output's gradient is broadcast back over the
// reduced dims, weighted by how each input element contributed.
#include <coil/ops.h>

#include <algorithm>

#include "autograd/derivatives.h"
#include "graph/sym_node.h"
#include "graph/dims.h"

namespace coil::autograd {

namespace {

using C = const GradCtx&;

// The reduced dims of a `dim` argument, non-negative and sorted ({} means all).
Shape reduced_dims(const Tensor& x, const Shape& dims, const char* op) {
  Shape d;
  if (dims.empty()) {
    for (int64_t i = 0; i < x.dim(); ++i) d.push_back(i);
  } else {
    d = wrap_dims(dims, x.dim(), op);
  }
  std::sort(d.begin(), d.end());
  return d;
}

// A reduction's output (or gradient) with its reduced dims restored as size 1.
Tensor keep_dims(const Tensor& r, const Tensor& x, const Shape& dims, bool keepdim) {
  if (keepdim) return r;
  Tensor k = r;
  for (int64_t d : dims) k = k.unsqueeze(d);
  return k;
}

SymInt reduced_count(const Tensor& x, const Shape& dims) {
  SymInt n = 1;
  for (int64_t d : dims) n = n * x.sym_size(d);
  return n;
}

// The args of sum/mean/prod/amax/amin/var/std: (self, dim, [correction,] keepdim).
struct Reduction {
  Shape dims;
  bool keepdim;
  Tensor grad;  // the output gradient with the reduced dims restored, expanded to x
  Tensor out;   // the output with the reduced dims restored (size 1)
};
Reduction reduction(C c, size_t keepdim_arg) {
  const Tensor& x = c.in(0);
  Reduction r;
  r.dims = reduced_dims(x, c.args.ints(1), op_name(c.op));
  r.keepdim = c.args.b(keepdim_arg);
  r.grad = keep_dims(c.grad(), x, r.dims, r.keepdim).expand_symint(x.sym_sizes());
  r.out = keep_dims(c.out(), x, r.dims, r.keepdim);
  return r;
}

void sum_rule(C c) { c.set(0, reduction(c, 2).grad); }

void mean_rule(C c) {
  Reduction r = reduction(c, 2);
  const SymInt n = reduced_count(c.in(0), r.dims);
  // An empty reduction's gradient is empty: no division by its zero count.
  c.set(0, !n.is_symbolic() ? r.grad / static_cast<double>(std::max<int64_t>(n.hint(), 1))
                            : r.grad / size_scalar(n, r.grad));
}

void prod_rule(C c) {
  Reduction r = reduction(c, 2);
  c.set(0, r.grad * r.out / c.in(0));
}

// amax/amin: the gradient is shared evenly by the elements that attain the extreme.
void extreme_rule(C c) {
  Reduction r = reduction(c, 2);
  Tensor hit = (c.in(0) == r.out).to(c.grad().dtype());
  c.set(0, r.grad * hit / sum(hit, r.dims, /*keepdim=*/true));
}

void var_rule(C c) {
  Reduction r = reduction(c, 3);
  const Tensor& x = c.in(0);
  const SymInt n = reduced_count(x, r.dims);
  const double correction = c.args.f64(2);
  Tensor d = r.grad * (x - mean(x, r.dims, true));
  c.set(0, n.is_symbolic() ? d * 2 / (size_scalar(n, x) - correction)
                           : d * (2 / (static_cast<double>(n.hint()) - correction)));
}

void std_rule(C c) {
  Reduction r = reduction(c, 3);
  const Tensor& x = c.in(0);
  const SymInt n = reduced_count(x, r.dims);
  const double correction = c.args.f64(2);
  Tensor d = r.grad * (x - mean(x, r.dims, true));
  c.set(0, n.is_symbolic() ? d / (r.out * (size_scalar(n, x) - correction))
                           : d / (r.out * (static_cast<double>(n.hint()) - correction)));
}

void logsumexp_rule(C c) {
  Reduction r = reduction(c, 2);
  c.set(0, r.grad * exp(c.in(0) - r.out));
}

void cumsum_rule(C c) {
  const int64_t d = wrap_dim(c.args.i64(1), c.in(0).dim(), "cumsum");
  c.set(0, flip(cumsum(flip(c.grad(), {d}), d), {d}));
}

}  // namespace

std::vector<RuleEntry> reduction_rules() {
  return {
      {OpId::sum, sum_rule},      {OpId::mean, mean_rule},           {OpId::prod, prod_rule},
      {OpId::amax, extreme_rule}, {OpId::amin, extreme_rule},        {OpId::var, var_rule},
      {OpId::std, std_rule},      {OpId::logsumexp, logsumexp_rule}, {OpId::cumsum, cumsum_rule},
  };
}

}  // namespace coil::autograd
