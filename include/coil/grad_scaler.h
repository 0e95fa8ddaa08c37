// Loss scaling for float16 training, as torch.amp.GradScaler.
//
//   coil::amp::GradScaler scaler;
//   for (...) {
//     opt.zero_grad();
//     Tensor loss;
//     {
//       coil::autocast on(coil::DeviceType::CUDA, coil::kFloat16);
//       loss = coil::cross_entropy(model->forward(x), y);
//     }
//     scaler.scale(loss).backward();   // gradients of the scaled loss: small ones stay normal
//     scaler.step(opt);                // unscales, and skips the step if any is inf or NaN
//     scaler.update();                 // halves the scale after a skipped step, grows it after
//   }                                  // growth_interval clean ones
//
// The scale is a power of two (by default), so scaling and unscaling are exact. With a compiled
// Adam or AdamW, step() unscales, checks every gradient for inf and NaN and applies the update
// in the optimizer's one compiled step (Optimizer::step_unscaling). Otherwise, and after an
// explicit unscale_(), the check and the unscaling run as one compiled function per device and
// the optimizer's own step follows.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>

#include <coil/optim.h>
#include <coil/tensor.h>

namespace coil::amp {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;  // clean steps in a row before the scale grows
  bool enabled = true;             // false: every call passes through (scale 1, no checks)
};

// What state_dict() saves and load_state_dict() restores (PyTorch's keys, as fields).
struct GradScalerState {
  double scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  int64_t growth_tracker = 0;  // clean steps since the scale last changed
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  // loss * scale (loss itself when disabled).
  Tensor scale(const Tensor& loss) const;
  // Divides the gradients of `opt`'s parameters by the scale in place and records whether any
  // is inf or NaN. At most once per optimizer between updates (a coil::Error otherwise): call it
  // before clipping gradients, then step().
  void unscale_(optim::Optimizer& opt);
  // Unscales (unless unscale_ did), then steps `opt` unless a gradient was inf or NaN. Returns
  // whether it stepped.
  bool step(optim::Optimizer& opt);
  // After the steps of an iteration: the scale times backoff_factor if any step was skipped,
  // else times growth_factor after growth_interval clean iterations in a row; or `new_scale`.
  void update(std::optional<double> new_scale = std::nullopt);

  double get_scale() const { return enabled_ ? state_.scale : 1.0; }
  bool is_enabled() const { return enabled_; }
  GradScalerState state_dict() const { return state_; }
  void load_state_dict(const GradScalerState& state);

 private:
  bool enabled_;
  GradScalerState state_;
  // The optimizers whose gradients were unscaled since the last update, and whether any of
  // them was inf or NaN.
  std::unordered_map<const optim::Optimizer*, bool> found_inf_;
};

}  // namespace coil::amp
