// Parameter initialisation, as torch.nn.init. Each function fills its tensor in place from
// coil's default random generator (coil::manual_seed makes it repeatable) and records nothing
// for autograd, as PyTorch's run under no_grad.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include <coil/scalar.h>
#include <coil/tensor.h>

namespace coil::nn::init {

// The recommended gain for a nonlinearity: "linear", "conv1d", "conv2d", "sigmoid" -> 1;
// "tanh" -> 5/3; "relu" -> sqrt(2); "leaky_relu" -> sqrt(2 / (1 + param^2)); "selu" -> 3/4.
double calculate_gain(const std::string& nonlinearity, double param = 0.01);
// (fan_in, fan_out) of a weight of at least 2 dims: (size(1), size(0)) times the receptive
// field (the product of the dims after the second).
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);

const Tensor& uniform_(const Tensor& t, double a = 0, double b = 1);
const Tensor& normal_(const Tensor& t, double mean = 0, double std = 1);
const Tensor& constant_(const Tensor& t, const Scalar& value);
const Tensor& zeros_(const Tensor& t);
const Tensor& ones_(const Tensor& t);
// U(-bound, bound), bound = gain * sqrt(3 / fan) with gain = calculate_gain(nonlinearity, a)
// and fan = fan_in or fan_out (mode "fan_in" / "fan_out").
const Tensor& kaiming_uniform_(const Tensor& t, double a = 0, const std::string& mode = "fan_in",
                               const std::string& nonlinearity = "leaky_relu");
// N(0, std), std = gain / sqrt(fan).
const Tensor& kaiming_normal_(const Tensor& t, double a = 0, const std::string& mode = "fan_in",
                              const std::string& nonlinearity = "leaky_relu");
// U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out)).
const Tensor& xavier_uniform_(const Tensor& t, double gain = 1);
// N(0, std), std = gain * sqrt(2 / (fan_in + fan_out)).
const Tensor& xavier_normal_(const Tensor& t, double gain = 1);

}  // namespace coil::nn::init
