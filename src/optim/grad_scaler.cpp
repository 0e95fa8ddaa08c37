#include <coil/compile.h>
#include <coil/error.h>
#include <coil/grad_scaler.h>
#include <coil/ops.h>

#include <map>
#include <string>

namespace coil::amp {

namespace {

void check_options(const GradScalerState& s, const char* what) {
  COIL_CHECK(s.scale > 0 && s.growth_factor > 1 && s.backoff_factor > 0 && s.backoff_factor < 1 &&
                 s.growth_interval > 0 && s.growth_tracker >= 0,
             what, ": the scale (", s.scale, ") must be positive, growth_factor (", s.growth_factor,
             ") above 1, backoff_factor (", s.backoff_factor,
             ") between 0 and 1, growth_interval (", s.growth_interval,
             ") positive and the growth tracker (", s.growth_tracker, ") not negative");
}

// Every gradient times `inv_scale` in place; the count of inf and NaN elements among them
// before (0-d int64). One compiled function: the multiplications and the counts fuse into one
// kernel a device (a combo kernel over the list), and inv_scale is a tensor, so that a new
// scale compiles nothing.
int64_t unscale_and_count_nonfinite(const std::vector<Tensor>& grads, const Tensor& inv_scale) {
  static auto unscale = compile(
      [](const std::vector<Tensor>& gs, const Tensor& inv) {
        Tensor bad = zeros({}, kInt64, inv.device());
        for (const Tensor& g : gs) {
          bad = bad + logical_or(isnan(g), isinf(g)).sum();
          g.mul_(inv);
        }
        return bad;
      },
      {.name = "grad_scaler_unscale"});
  return unscale(grads, inv_scale).item<int64_t>();
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions o)
    : enabled_(o.enabled),
      state_{o.init_scale, o.growth_factor, o.backoff_factor, o.growth_interval, 0} {
  check_options(state_, "GradScaler");
}

Tensor GradScaler::scale(const Tensor& loss) const {
  if (!enabled_) return loss;
  COIL_CHECK(loss.defined() && is_floating(loss.dtype()), "GradScaler::scale: the loss must be a ",
             "floating tensor, not ", loss.defined() ? dtype_name(loss.dtype()) : "undefined");
  return loss * state_.scale;
}

void GradScaler::unscale_(optim::Optimizer& opt) {
  if (!enabled_) return;
  COIL_CHECK(!found_inf_.count(&opt),
             "GradScaler::unscale_: already called for this optimizer since the last update(); "
             "call it once per step, before step()");
  bool& found_inf = found_inf_[&opt];
  std::map<std::pair<int, int>, std::vector<Tensor>> by_device;  // (type, index) -> grads
  for (const Tensor& p : opt.parameters()) {
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    COIL_CHECK(g.dtype() != kFloat16 || p.dtype() != kFloat16,
               "GradScaler::unscale_: a float16 parameter has a float16 gradient; keep the "
               "parameters in float32 (autocast casts them for the products) and unscale those");
    by_device[{static_cast<int>(g.device().type), g.device().index}].push_back(g);
  }
  for (const auto& [device, grads] : by_device) {
    const Tensor inv = full({}, 1.0 / state_.scale, kFloat32, grads.front().device());
    found_inf = unscale_and_count_nonfinite(grads, inv) > 0 || found_inf;
  }
}

bool GradScaler::step(optim::Optimizer& opt) {
  if (!enabled_) {
    opt.step();
    return true;
  }
  if (!found_inf_.count(&opt)) {
    // Unscaled, checked and stepped in the optimizer's compiled step where it has one.
    if (const std::optional<bool> stepped = opt.step_unscaling(1.0 / state_.scale)) {
      found_inf_[&opt] = !*stepped;
      return *stepped;
    }
    unscale_(opt);
  }
  if (found_inf_.at(&opt)) return false;
  opt.step();
  return true;
}

void GradScaler::update(std::optional<double> new_scale) {
  if (!enabled_) return;
  if (new_scale) {
    COIL_CHECK(*new_scale > 0, "GradScaler::update: the new scale (", *new_scale,
               ") must be positive");
    state_.scale = *new_scale;
    state_.growth_tracker = 0;
  } else {
    bool found_inf = false;
    for (const auto& [opt, inf] : found_inf_) found_inf = found_inf || inf;
    if (found_inf) {
      state_.scale *= state_.backoff_factor;
      state_.growth_tracker = 0;
    } else if (++state_.growth_tracker == state_.growth_interval) {
      state_.scale *= state_.growth_factor;
      state_.growth_tracker = 0;
    }
  }
  found_inf_.clear();
}

void GradScaler::load_state_dict(const GradScalerState& state) {
  check_options(state, "GradScaler::load_state_dict");
  state_ = state;
}

}  // namespace coil::amp
