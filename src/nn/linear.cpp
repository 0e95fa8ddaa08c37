#include <coil/nn/init.h>
#include <coil/nn/linear.h>
#include <coil/ops.h>

#include <cmath>

namespace coil::nn {

Linear::Linear(int64_t in, int64_t out, bool with_bias, DType dtype)
    : in_features(in), out_features(out) {
  COIL_CHECK(in >= 0 && out >= 0, "nn::Linear: in_features and out_features must be >= 0, got ", in,
             " and ", out);
  COIL_CHECK(is_floating(dtype), "nn::Linear: parameters must be floating-point, got dtype ",
             dtype_name(dtype));
  Tensor w = empty({out, in}, dtype);
  init::kaiming_uniform_(w, std::sqrt(5.0));
  weight = register_parameter("weight", w);
  Tensor b;
  if (with_bias) {
    b = empty({out}, dtype);
    double bound = in > 0 ? 1.0 / std::sqrt(double(in)) : 0.0;
    init::uniform_(b, -bound, bound);
  }
  bias = register_parameter("bias", b);
}

Tensor Linear::forward(const Tensor& x) {
  COIL_CHECK(x.dim() >= 1 && x.size(-1) == in_features, "nn::Linear(in_features=", in_features,
             ", out_features=", out_features, "): expected an input whose last dim is ",
             in_features, ", got shape ", shape_str(x.sizes()));
  return linear(x, weight, bias);
}

std::string Linear::extra_repr() const {
  return detail::str_cat("in_features=", in_features, ", out_features=", out_features,
                         ", bias=", bias.defined() ? "True" : "False");
}

}  // namespace coil::nn
