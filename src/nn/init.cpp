#include <coil/nn/init.h>
#include <coil/ops.h>

#include <cmath>

#include "runtime/copy.h"

namespace coil::nn::init {

namespace {

void check_target(const Tensor& t, const char* fn) {
  COIL_CHECK(t.defined(), "nn::init::", fn, ": the tensor is undefined");
  COIL_CHECK(t.has_storage(), "nn::init::", fn,
             ": the tensor has no data (made while capturing a compiled function?); initialise "
             "real tensors");
  COIL_CHECK(t.is_floating_point(), "nn::init::", fn, ": expected a floating-point tensor, got ",
             dtype_name(t.dtype()), " ", shape_str(t.sizes()));
}

// Draws in float32 (float64 for float64 tensors) and writes into `t` without autograd.
const Tensor& write(const Tensor& t, const Tensor& values) {
  copy_into(t, values);
  return t;
}

DType draw_dtype(const Tensor& t) { return t.dtype() == kFloat64 ? kFloat64 : kFloat32; }

int64_t fan_of(const Tensor& t, const std::string& mode, const char* fn) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  COIL_CHECK(mode == "fan_in" || mode == "fan_out", "nn::init::", fn, ": mode must be \"fan_in\" ",
             "or \"fan_out\", got \"", mode, "\"");
  return mode == "fan_in" ? fan_in : fan_out;
}

}  // namespace

double calculate_gain(const std::string& nonlinearity, double param) {
  if (nonlinearity == "linear" || nonlinearity == "conv1d" || nonlinearity == "conv2d" ||
      nonlinearity == "conv3d" || nonlinearity == "sigmoid")
    return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") return std::sqrt(2.0 / (1 + param * param));
  if (nonlinearity == "selu") return 3.0 / 4.0;
  throw Error("nn::init::calculate_gain: unsupported nonlinearity \"" + nonlinearity +
              "\"; use linear, conv1d, conv2d, conv3d, sigmoid, tanh, relu, leaky_relu or selu");
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  COIL_CHECK(t.dim() >= 2, "nn::init: fan in and fan out cannot be computed for a tensor with ",
             "fewer than 2 dimensions, got ", shape_str(t.sizes()));
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

const Tensor& uniform_(const Tensor& t, double a, double b) {
  check_target(t, "uniform_");
  COIL_CHECK(a <= b, "nn::init::uniform_: expected a <= b, got a=", a, ", b=", b);
  return write(t, rand(t.sizes(), draw_dtype(t)) * (b - a) + a);
}

const Tensor& normal_(const Tensor& t, double mean, double std) {
  check_target(t, "normal_");
  COIL_CHECK(std >= 0, "nn::init::normal_: std must be >= 0, got ", std);
  return write(t, randn(t.sizes(), draw_dtype(t)) * std + mean);
}

const Tensor& constant_(const Tensor& t, const Scalar& value) {
  check_target(t, "constant_");
  fill(t, value);
  return t;
}
const Tensor& zeros_(const Tensor& t) { return constant_(t, 0); }
const Tensor& ones_(const Tensor& t) { return constant_(t, 1); }

const Tensor& kaiming_uniform_(const Tensor& t, double a, const std::string& mode,
                               const std::string& nonlinearity) {
  check_target(t, "kaiming_uniform_");
  int64_t fan = fan_of(t, mode, "kaiming_uniform_");
  if (fan == 0) return t;  // an empty tensor: nothing to fill (PyTorch warns and returns)
  double bound = std::sqrt(3.0) * calculate_gain(nonlinearity, a) / std::sqrt(double(fan));
  return uniform_(t, -bound, bound);
}

const Tensor& kaiming_normal_(const Tensor& t, double a, const std::string& mode,
                              const std::string& nonlinearity) {
  check_target(t, "kaiming_normal_");
  int64_t fan = fan_of(t, mode, "kaiming_normal_");
  if (fan == 0) return t;
  return normal_(t, 0, calculate_gain(nonlinearity, a) / std::sqrt(double(fan)));
}

const Tensor& xavier_uniform_(const Tensor& t, double gain) {
  check_target(t, "xavier_uniform_");
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  if (fan_in + fan_out == 0) return t;
  double a = gain * std::sqrt(6.0 / double(fan_in + fan_out));
  return uniform_(t, -a, a);
}

const Tensor& xavier_normal_(const Tensor& t, double gain) {
  check_target(t, "xavier_normal_");
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  if (fan_in + fan_out == 0) return t;
  return normal_(t, 0, gain * std::sqrt(2.0 / double(fan_in + fan_out)));
}

}  // namespace coil::nn::init
