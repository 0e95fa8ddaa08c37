#include "graph/autocast.h"

#include <array>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include <coil/cuda.h>
#include <coil/error.h>

#include "runtime/tensor_impl.h"

namespace coil {

namespace {

struct State {
  bool enabled = false;
  DType dtype;
};

// The casts of leaves that require grad made in the open autocast scopes (PyTorch's
// cached_casts), by the leaf and the dtype, each with the leaf itself (weakly, so that a freed
// leaf's address taken again misses) and its storage's version then (a leaf written in place
// since, by an optimizer's step inside the scope, is cast again: PyTorch's cache would serve the
// stale cast); emptied when the outermost scope ends.
struct CachedCast {
  std::weak_ptr<TensorImpl> leaf;
  uint64_t version;
  Tensor cast;
};
struct CastCache {
  int depth = 0;        // autocast scopes open in this thread
  bool enabled = true;  // the innermost scope's cache_enabled
  std::map<std::pair<const TensorImpl*, DType>, CachedCast> casts;
};
thread_local CastCache tls_cache;

constexpr size_t index_of(DeviceType d) { return d == DeviceType::CPU ? 0 : 1; }

// Per thread, per device type: off, with PyTorch's default dtypes (CPU bfloat16, GPU float16).
thread_local std::array<State, 2> tls_state = {State{false, kBFloat16}, State{false, kFloat16}};

}  // namespace

bool is_autocast_enabled(DeviceType device) { return tls_state[index_of(device)].enabled; }
DType autocast_dtype(DeviceType device) { return tls_state[index_of(device)].dtype; }
bool autocast_active() { return tls_state[0].enabled || tls_state[1].enabled; }

uint32_t autocast_state() {
  uint32_t state = 0;
  for (size_t d = 0; d < 2; ++d)
    if (tls_state[d].enabled) state |= (1u + static_cast<uint32_t>(tls_state[d].dtype)) << (8 * d);
  return state;
}

std::string autocast_state_str(uint32_t state) {
  std::string out;
  for (size_t d = 0; d < 2; ++d)
    if (const uint32_t s = (state >> (8 * d)) & 0xff)
      out += std::string(out.empty() ? "" : ", ") + (d == 0 ? "cpu " : "cuda ") +
             dtype_name(static_cast<DType>(s - 1));
  return out.empty() ? "off" : out;
}

autocast::autocast(DeviceType device, std::optional<DType> dtype, bool enabled, bool cache_enabled)
    : device_(device),
      was_enabled_(is_autocast_enabled(device)),
      was_dtype_(autocast_dtype(device)),
      was_caching_(tls_cache.enabled) {
  const char* name = device == DeviceType::CPU ? "cpu" : "cuda";
  if (dtype)
    COIL_CHECK(*dtype == kBFloat16 || *dtype == kFloat16, "autocast(", name, "): dtype ",
               dtype_name(*dtype),
               " is not a lower precision autocast casts to; pass kBFloat16 or kFloat16");
  COIL_CHECK(device != DeviceType::CUDA || !enabled || cuda::is_built(),
             "autocast(cuda): coil was built without CUDA; autocast the CPU instead");
  State& s = tls_state[index_of(device)];
  s.enabled = enabled;
  if (dtype) s.dtype = *dtype;
  ++tls_cache.depth;
  tls_cache.enabled = cache_enabled;
}

autocast::~autocast() {
  tls_state[index_of(device_)] = State{was_enabled_, was_dtype_};
  tls_cache.enabled = was_caching_;
  if (--tls_cache.depth == 0) tls_cache.casts.clear();
}

AutocastOff::AutocastOff() : was_{tls_state[0].enabled, tls_state[1].enabled} {
  tls_state[0].enabled = tls_state[1].enabled = false;
}
AutocastOff::~AutocastOff() {
  tls_state[0].enabled = was_[0];
  tls_state[1].enabled = was_[1];
}

// PyTorch's lists (aten/src/ATen/autocast_mode.h and .cpp) for the ops coil has. addmm_relu is
// coil's addmm with a ReLU epilogue, and takes addmm's policy; cross_entropy is a loss on both
// devices (PyTorch's CUDA list has it through log_softmax and nll_loss).
std::optional<CastPolicy> autocast_policy(DeviceType device, OpId op) {
  using P = CastPolicy;
  switch (op) {
    case OpId::mm:
    case OpId::bmm:
    case OpId::addmm:
    case OpId::addmm_relu:
    case OpId::matmul:
    case OpId::linear:
    case OpId::conv2d:
    case OpId::scaled_dot_product_attention:
      return P::LowerPrecision;
    case OpId::prod:
      return device == DeviceType::CUDA ? P::Float32Result : P::Float32;
    case OpId::mse_loss:
    case OpId::nll_loss:
    case OpId::cross_entropy:
      return P::Float32;
    case OpId::cat:
    case OpId::stack:
      return device == DeviceType::CPU ? std::optional(P::Promote) : std::nullopt;
    default:
      break;
  }
  if (device != DeviceType::CUDA) return std::nullopt;
  switch (op) {
    case OpId::exp:
    case OpId::expm1:
    case OpId::log:
    case OpId::log2:
    case OpId::log1p:
    case OpId::reciprocal:
    case OpId::rsqrt:
    case OpId::tan:
    case OpId::pow:
    case OpId::layer_norm:
    case OpId::group_norm:
    case OpId::logsumexp:
      return P::Float32;
    case OpId::softmax:
    case OpId::log_softmax:
    case OpId::cumsum:
    case OpId::sum:
      return P::Float32Result;
    case OpId::atan2:
    case OpId::scatter_add:
      return P::Promote;
    default:
      return std::nullopt;
  }
}

namespace {

// A tensor autocast may cast: floating, not float64, on the device.
bool eligible(const Tensor& t, DeviceType device) {
  return t.defined() && is_floating(t.dtype()) && t.dtype() != kFloat64 &&
         t.device().type == device;
}

template <typename F>
void for_each_tensor(std::vector<Arg>& args, F&& f) {
  for (Arg& a : args) {
    if (auto* t = std::get_if<Tensor>(&a)) f(*t);
    if (auto* ts = std::get_if<std::vector<Tensor>>(&a))
      for (Tensor& t : *ts) f(t);
  }
}

// The device whose autocast applies: the first tensor argument's.
std::optional<DeviceType> device_of(std::vector<Arg>& args) {
  std::optional<DeviceType> d;
  for_each_tensor(args, [&](const Tensor& t) {
    if (!d && t.defined()) d = t.device().type;
  });
  return d;
}

// The position of a reduction's dtype argument (nullopt: the op takes none).
std::optional<size_t> dtype_position(OpId op) {
  if (op == OpId::sum) return 3;
  if (op == OpId::cumsum) return 2;
  return std::nullopt;
}

// `t` in `to`: a weight's cast made once per scope (not while a compiled function captures:
// its graph has the casts, and a cast made outside it is not one of its values).
Tensor cast(const Tensor& t, DType to) {
  const bool cacheable = tls_cache.enabled && t.is_leaf() && t.requires_grad() && t.has_storage() &&
                         !current_dispatch_hook();
  if (!cacheable) return call_op1(OpId::to_dtype, {t, to});
  const auto key = std::make_pair(t.impl(), to);
  const uint64_t version = t.impl()->storage->version;
  if (auto it = tls_cache.casts.find(key); it != tls_cache.casts.end() &&
                                           it->second.leaf.lock() == t.impl_ptr() &&
                                           it->second.version == version)
    return it->second.cast;
  Tensor c = call_op1(OpId::to_dtype, {t, to});
  tls_cache.casts[key] = CachedCast{t.impl_ptr(), version, c};
  return c;
}

}  // namespace

void apply_autocast(OpId op, std::vector<Arg>& args) {
  const std::optional<DeviceType> device = device_of(args);
  if (!device || !is_autocast_enabled(*device)) return;
  const std::optional<CastPolicy> policy = autocast_policy(*device, op);
  if (!policy) return;
  auto cast_all = [&](DType to) {
    for_each_tensor(args, [&](Tensor& t) {
      if (eligible(t, *device) && t.dtype() != to) t = cast(t, to);
    });
  };
  switch (*policy) {
    case CastPolicy::LowerPrecision:
      return cast_all(autocast_dtype(*device));
    case CastPolicy::Float32:
      return cast_all(kFloat32);
    case CastPolicy::Float32Result: {
      const Tensor* first = std::get_if<Tensor>(&args.at(0));
      if (!first || !eligible(*first, *device)) return;
      const std::optional<size_t> at = dtype_position(op);
      if (!at) return cast_all(kFloat32);  // an op with no dtype argument: its input
      if (std::holds_alternative<std::monostate>(args.at(*at))) args[*at] = kFloat32;
      return;
    }
    case CastPolicy::Promote: {
      std::optional<DType> widest;
      for_each_tensor(args, [&](const Tensor& t) {
        if (eligible(t, *device)) widest = widest ? promote_types(*widest, t.dtype()) : t.dtype();
      });
      if (widest) cast_all(*widest);
      return;
    }
  }
}

}  // namespace coil
