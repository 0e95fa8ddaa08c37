// Normalisation layers: nn::BatchNorm2d, nn::LayerNorm, nn::RMSNorm, as their torch.nn
// namesakes.
#pragma once

#include <cstdint>
#include <optional>

#include <coil/nn/module.h>

namespace coil::nn {

struct BatchNormOptions {
  double eps = 1e-5;
  // The running statistics' update factor; std::nullopt: a cumulative average (1 / number
  // of batches seen).
  std::optional<double> momentum = 0.1;
  bool affine = true;               // learnable weight (ones) and bias (zeros)
  bool track_running_stats = true;  // buffers running_mean, running_var, num_batches_tracked
  DType dtype = kFloat32;
};

// Over (N, C, H, W). Training: normalises by the batch's statistics and updates the running
// ones (unbiased variance) in place, counting batches in num_batches_tracked. Evaluation:
// normalises by the running statistics (by the batch's when they are not tracked).
class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t num_features, BatchNormOptions options = {});
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  int64_t num_features;
  BatchNormOptions options;
  Tensor weight, bias;                                    // undefined unless affine
  Tensor running_mean, running_var, num_batches_tracked;  // undefined unless tracked
};

struct LayerNormOptions {
  double eps = 1e-5;
  bool elementwise_affine = true;  // learnable weight (ones)...
  bool bias = true;                // ...and bias (zeros)
  DType dtype = kFloat32;
};

// Normalises over the trailing dims `normalized_shape` (mean and biased variance).
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, LayerNormOptions options = {});
  explicit LayerNorm(int64_t normalized_size, LayerNormOptions options = {})
      : LayerNorm(Shape{normalized_size}, options) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  Shape normalized_shape;
  LayerNormOptions options;
  Tensor weight, bias;
};

struct RMSNormOptions {
  std::optional<double> eps;  // std::nullopt: the input dtype's machine epsilon, as PyTorch
  bool elementwise_affine = true;
  DType dtype = kFloat32;
};

// x / sqrt(mean(x^2 over normalized_shape) + eps) * weight.
class RMSNorm : public Module {
 public:
  explicit RMSNorm(Shape normalized_shape, RMSNormOptions options = {});
  explicit RMSNorm(int64_t normalized_size, RMSNormOptions options = {})
      : RMSNorm(Shape{normalized_size}, options) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  Shape normalized_shape;
  RMSNormOptions options;
  Tensor weight;
};

}  // namespace coil::nn
