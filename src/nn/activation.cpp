// The stateless layers: activations, Dropout and Flatten.
#include <coil/nn/activation.h>
#include <coil/nn/dropout.h>
#include <coil/nn/flatten.h>
#include <coil/ops.h>

namespace coil::nn {

Tensor ReLU::forward(const Tensor& x) { return relu(x); }
Tensor SiLU::forward(const Tensor& x) { return silu(x); }
Tensor Tanh::forward(const Tensor& x) { return tanh(x); }
Tensor Sigmoid::forward(const Tensor& x) { return sigmoid(x); }

GELU::GELU(std::string approx) : approximate(std::move(approx)) {
  COIL_CHECK(approximate == "none" || approximate == "tanh",
             "nn::GELU: approximate must be \"none\" or \"tanh\", got \"", approximate, "\"");
}
Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate); }
std::string GELU::extra_repr() const {
  return approximate == "none" ? "" : "approximate='" + approximate + "'";
}

Dropout::Dropout(double p_) : p(p_) {
  COIL_CHECK(p >= 0 && p <= 1, "nn::Dropout: the probability p must be in [0, 1], got ", p);
}
Tensor Dropout::forward(const Tensor& x) { return dropout(x, p, is_training()); }
std::string Dropout::extra_repr() const { return detail::str_cat("p=", p, ", inplace=False"); }

std::string Flatten::extra_repr() const {
  return detail::str_cat("start_dim=", start_dim, ", end_dim=", end_dim);
}

}  // namespace coil::nn
