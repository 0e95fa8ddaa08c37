#include <coil/nn/conv.h>
#include <coil/nn/init.h>
#include <coil/ops.h>

#include <cmath>

namespace coil::nn {

namespace {
// {k} -> {k, k}; {a, b} stays; anything else is an error naming the option.
Shape pair_of(const Shape& v, const char* what, int64_t min) {
  COIL_CHECK(v.size() == 1 || v.size() == 2, "nn::Conv2d: ", what,
             " takes one value or two (height, width), got ", shape_str(v));
  Shape out = v.size() == 1 ? Shape{v[0], v[0]} : v;
  COIL_CHECK(out[0] >= min && out[1] >= min, "nn::Conv2d: ", what, " must be >= ", min, ", got ",
             shape_str(v));
  return out;
}
}  // namespace

Conv2d::Conv2d(int64_t in, int64_t out, Shape kernel, Conv2dOptions o)
    : in_channels(in),
      out_channels(out),
      kernel_size(pair_of(kernel, "kernel_size", 1)),
      stride(pair_of(o.stride, "stride", 1)),
      padding(pair_of(o.padding, "padding", 0)),
      dilation(pair_of(o.dilation, "dilation", 1)),
      groups(o.groups) {
  COIL_CHECK(in > 0 && out > 0, "nn::Conv2d: in_channels and out_channels must be positive, got ",
             in, " and ", out);
  COIL_CHECK(groups > 0 && in % groups == 0 && out % groups == 0, "nn::Conv2d: groups (", groups,
             ") must be positive and divide both in_channels (", in, ") and out_channels (", out,
             ")");
  COIL_CHECK(is_floating(o.dtype), "nn::Conv2d: parameters must be floating-point, got dtype ",
             dtype_name(o.dtype));
  Tensor w = empty({out, in / groups, kernel_size[0], kernel_size[1]}, o.dtype);
  init::kaiming_uniform_(w, std::sqrt(5.0));
  weight = register_parameter("weight", w);
  Tensor b;
  if (o.bias) {
    b = empty({out}, o.dtype);
    int64_t fan_in = init::calculate_fan_in_and_fan_out(w).first;
    double bound = 1.0 / std::sqrt(double(fan_in));
    init::uniform_(b, -bound, bound);
  }
  bias = register_parameter("bias", b);
}

Tensor Conv2d::forward(const Tensor& x) {
  COIL_CHECK((x.dim() == 4 || x.dim() == 3) && x.size(-3) == in_channels, "nn::Conv2d(",
             extra_repr(), "): expected an input of shape (N, ", in_channels, ", H, W) or (",
             in_channels, ", H, W), got ", shape_str(x.sizes()));
  if (x.dim() == 3) return forward(x.unsqueeze(0)).squeeze(0);
  return conv2d(x, weight, bias, stride, padding, dilation, groups);
}

std::string Conv2d::extra_repr() const {
  auto pair = [](const Shape& s) { return detail::str_cat("(", s[0], ", ", s[1], ")"); };
  std::string s = detail::str_cat(in_channels, ", ", out_channels,
                                  ", kernel_size=", pair(kernel_size), ", stride=", pair(stride));
  if (padding != Shape{0, 0}) s += ", padding=" + pair(padding);
  if (dilation != Shape{1, 1}) s += ", dilation=" + pair(dilation);
  if (groups != 1) s += detail::str_cat(", groups=", groups);
  if (!bias.defined()) s += ", bias=False";
  return s;
}

}  // namespace coil::nn
