#include <coil/nn/normalization.h>
#include <coil/ops.h>

namespace coil::nn {

BatchNorm2d::BatchNorm2d(int64_t n, BatchNormOptions o) : num_features(n), options(o) {
  COIL_CHECK(n > 0, "nn::BatchNorm2d: num_features must be positive, got ", n);
  COIL_CHECK(is_floating(o.dtype), "nn::BatchNorm2d: parameters must be floating-point, got ",
             "dtype ", dtype_name(o.dtype));
  COIL_CHECK(!o.momentum || (*o.momentum >= 0 && *o.momentum <= 1),
             "nn::BatchNorm2d: momentum must be in [0, 1] (or std::nullopt for a cumulative ",
             "average), got ", o.momentum.value_or(0));
  weight = register_parameter("weight", o.affine ? ones({n}, o.dtype) : Tensor());
  bias = register_parameter("bias", o.affine ? zeros({n}, o.dtype) : Tensor());
  if (o.track_running_stats) {
    running_mean = register_buffer("running_mean", zeros({n}, o.dtype));
    running_var = register_buffer("running_var", ones({n}, o.dtype));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, kInt64));
  } else {
    register_buffer("running_mean", Tensor());
    register_buffer("running_var", Tensor());
    register_buffer("num_batches_tracked", Tensor());
  }
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  COIL_CHECK(x.dim() == 4, "nn::BatchNorm2d(", num_features,
             "): expected a 4-D input (N, C, H, W), got shape ", shape_str(x.sizes()));
  COIL_CHECK(x.size(1) == num_features, "nn::BatchNorm2d(", num_features, "): expected ",
             num_features, " channels (dim 1), got input of shape ", shape_str(x.sizes()));
  double factor = options.momentum.value_or(0.0);
  const bool training = is_training();
  if (training && options.track_running_stats) {
    num_batches_tracked.add_(1);
    if (!options.momentum) factor = 1.0 / num_batches_tracked.item<double>();
  }
  // Batch statistics in training, and in evaluation when there are no running ones.
  const bool use_batch_stats = training || !running_mean.defined();
  // Running statistics are updated in training only when tracked, read in evaluation.
  const bool pass_running = !training || options.track_running_stats;
  return batch_norm(x, weight, bias, pass_running ? running_mean : Tensor(),
                    pass_running ? running_var : Tensor(), use_batch_stats, factor, options.eps);
}

std::string BatchNorm2d::extra_repr() const {
  std::string momentum = options.momentum ? detail::str_cat(*options.momentum) : "None";
  return detail::str_cat(num_features, ", eps=", options.eps, ", momentum=", momentum,
                         ", affine=", options.affine ? "True" : "False",
                         ", track_running_stats=", options.track_running_stats ? "True" : "False");
}

}  // namespace coil::nn
