// nn::LayerNorm and nn::RMSNorm: normalisation over the trailing dims.
#include <coil/nn/normalization.h>
#include <coil/ops.h>

namespace coil::nn {

namespace {
void check_normalized_shape(const Shape& s, const char* module) {
  COIL_CHECK(!s.empty(), "nn::", module, ": normalized_shape must have at least one dim");
  for (int64_t d : s)
    COIL_CHECK(d > 0, "nn::", module, ": normalized_shape must be positive, got ", shape_str(s));
}

// The input's trailing dims must equal normalized_shape.
void check_input(const Tensor& x, const Shape& s, const char* module) {
  bool ok = x.dim() >= static_cast<int64_t>(s.size());
  for (size_t i = 0; ok && i < s.size(); ++i)
    ok = x.size(x.dim() - static_cast<int64_t>(s.size()) + static_cast<int64_t>(i)) == s[i];
  COIL_CHECK(ok, "nn::", module, "(", shape_str(s), "): the input's trailing dims must be ",
             shape_str(s), ", got input of shape ", shape_str(x.sizes()));
}
}  // namespace

LayerNorm::LayerNorm(Shape shape, LayerNormOptions o)
    : normalized_shape(std::move(shape)), options(o) {
  check_normalized_shape(normalized_shape, "LayerNorm");
  COIL_CHECK(is_floating(o.dtype), "nn::LayerNorm: parameters must be floating-point, got dtype ",
             dtype_name(o.dtype));
  weight = register_parameter("weight",
                              o.elementwise_affine ? ones(normalized_shape, o.dtype) : Tensor());
  bias = register_parameter(
      "bias", o.elementwise_affine && o.bias ? zeros(normalized_shape, o.dtype) : Tensor());
}

Tensor LayerNorm::forward(const Tensor& x) {
  check_input(x, normalized_shape, "LayerNorm");
  return layer_norm(x, normalized_shape, weight, bias, options.eps);
}

std::string LayerNorm::extra_repr() const {
  std::string shape = shape_str(normalized_shape);
  return detail::str_cat("(", shape.substr(1, shape.size() - 2),
                         normalized_shape.size() == 1 ? ",)" : ")", ", eps=", options.eps,
                         ", elementwise_affine=", options.elementwise_affine ? "True" : "False");
}

RMSNorm::RMSNorm(Shape shape, RMSNormOptions o) : normalized_shape(std::move(shape)), options(o) {
  check_normalized_shape(normalized_shape, "RMSNorm");
  COIL_CHECK(is_floating(o.dtype), "nn::RMSNorm: parameters must be floating-point, got dtype ",
             dtype_name(o.dtype));
  COIL_CHECK(!o.eps || *o.eps >= 0, "nn::RMSNorm: eps must be >= 0, got ", o.eps.value_or(0));
  weight = register_parameter("weight",
                              o.elementwise_affine ? ones(normalized_shape, o.dtype) : Tensor());
}

Tensor RMSNorm::forward(const Tensor& x) {
  check_input(x, normalized_shape, "RMSNorm");
  return rms_norm(x, normalized_shape, weight, options.eps);
}

std::string RMSNorm::extra_repr() const {
  std::string shape = shape_str(normalized_shape);
  std::string eps = options.eps ? detail::str_cat(*options.eps) : "None";
  return detail::str_cat("(", shape.substr(1, shape.size() - 2),
                         normalized_shape.size() == 1 ? ",)" : ")", ", eps=", eps,
                         ", elementwise_affine=", options.elementwise_affine ? "True" : "False");
}

}  // namespace coil::nn
