// gradcheck: the Jacobian autograd computes, row by row (one backward per output element),
// against central differences, column by column (two forwards per input element), in float64.
#include <coil/autograd.h>
#include <coil/ops.h>

#include <cmath>

namespace coil {

namespace {

std::vector<Tensor> run(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                        const std::vector<Tensor>& inputs) {
  std::vector<Tensor> outs = fn(inputs);
  for (Tensor& o : outs)
    if (o.defined() && o.dtype() != kFloat64 && o.is_floating_point()) o = o.to(kFloat64);
  return outs;
}

}  // namespace

bool gradcheck(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
               const std::vector<Tensor>& inputs, GradcheckOptions opt) {
  // float64 leaves: copies, contiguous, so that element k is data[k].
  std::vector<Tensor> xs;
  std::vector<size_t> differentiable;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (t.defined() && t.is_floating_point()) {
      xs.push_back(t.to(kFloat64).contiguous().clone().requires_grad_());
      differentiable.push_back(i);
    } else {
      xs.push_back(t);
    }
  }
  COIL_CHECK(!differentiable.empty(), "gradcheck: no floating-point input to differentiate");

  std::vector<Tensor> outs = run(fn, xs);
  std::vector<Tensor> diff_inputs;
  for (size_t i : differentiable) diff_inputs.push_back(xs[i]);

  for (size_t o = 0; o < outs.size(); ++o) {
    const Tensor& out = outs[o];
    if (!out.defined() || !out.is_floating_point()) continue;
    const int64_t n_out = out.numel();
    // Analytical rows: d out[j] / d inputs, one backward each.
    std::vector<std::vector<std::vector<double>>> analytical(n_out);
    for (int64_t j = 0; j < n_out; ++j) {
      Tensor seed = zeros(out.sizes(), kFloat64);
      seed.reshape({-1}).select(0, j).fill_(1);
      if (!out.requires_grad()) {
        for (const Tensor& x : diff_inputs) analytical[j].emplace_back(x.numel(), 0.0);
        continue;
      }
      std::vector<Tensor> g = autograd::grad({out}, diff_inputs, {seed}, /*retain_graph=*/true,
                                             /*create_graph=*/false, /*allow_unused=*/true);
      for (size_t k = 0; k < g.size(); ++k)
        analytical[j].push_back(g[k].defined() ? g[k].to_vector_double()
                                               : std::vector<double>(diff_inputs[k].numel(), 0.0));
    }
    // Numerical columns: perturb each input element both ways.
    for (size_t k = 0; k < diff_inputs.size(); ++k) {
      const Tensor& x = diff_inputs[k];
      double* data = x.data_ptr<double>();
      for (int64_t e = 0; e < x.numel(); ++e) {
        const double saved = data[e];
        std::vector<double> plus, minus;
        {
          NoGradGuard no_grad;
          data[e] = saved + opt.eps;
          plus = run(fn, xs)[o].to_vector_double();
          data[e] = saved - opt.eps;
          minus = run(fn, xs)[o].to_vector_double();
          data[e] = saved;
        }
        for (int64_t j = 0; j < n_out; ++j) {
          const double numerical = (plus[j] - minus[j]) / (2 * opt.eps);
          const double a = analytical[j][k][e];
          COIL_CHECK(std::abs(a - numerical) <= opt.atol + opt.rtol * std::abs(numerical),
                     "gradcheck: d output", o, "[", j, "] / d input", differentiable[k], "[", e,
                     "] is ", a, " by autograd but ", numerical,
                     " by finite differences (input sizes ", shape_str(x.sizes()),
                     ", output sizes ", shape_str(out.sizes()), ")");
        }
      }
    }
  }
  return true;
}

}  // namespace coil
