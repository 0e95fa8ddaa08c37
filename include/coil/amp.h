// Mixed precision, as torch.amp.
//
//   {
//     coil::autocast on(coil::DeviceType::CUDA, coil::kBFloat16);
//     Tensor logits = model->forward(x);   // products in bf16, softmax and losses in float32
//     loss = coil::cross_entropy(logits, y);
//   }
//   loss.backward();                       // the parameters' gradients in float32
//
// In an autocast scope each op on a tensor of that device runs in the precision PyTorch's lists
// give it: products, convolutions, linear layers and attention in the lower precision; exp, log,
// pow, norms, softmax, sums and losses in float32; a few ops (cat, stack, scatter_add, atan2) in
// the widest floating type of their inputs; the rest in their inputs' types. The casts are ops
// like any other (to_dtype), so autograd records them (a parameter's gradient comes back in its
// own dtype) and a compiled function's graph shows them. float64 tensors are never cast. The
// table is src/graph/autocast.cpp; docs/amp.md says more.
#pragma once

#include <optional>

#include <coil/device.h>
#include <coil/dtype.h>

namespace coil {

// Whether autocast is on for `device` in this thread, and the lower precision it casts to
// (by default float16 on the GPU and bfloat16 on the CPU, as PyTorch's).
bool is_autocast_enabled(DeviceType device);
DType autocast_dtype(DeviceType device);

// RAII: autocast on (or, with enabled = false, off) for `device` in this scope, casting to
// `dtype` (bfloat16 or float16; the device's default when none is given); the previous state
// comes back when it ends. Nested scopes work as PyTorch's: an inner autocast(device, {}, false)
// runs its ops in their own types. With `cache_enabled` (PyTorch's default), a leaf that
// requires grad (a weight) is cast once per dtype and the cast reused until the outermost scope
// ends, however many ops read it (a tied embedding and output layer: one cast, one gradient).
class autocast {
 public:
  explicit autocast(DeviceType device, std::optional<DType> dtype = std::nullopt,
                    bool enabled = true, bool cache_enabled = true);
  ~autocast();
  autocast(const autocast&) = delete;
  autocast& operator=(const autocast&) = delete;

 private:
  DeviceType device_;
  bool was_enabled_;
  DType was_dtype_;
  bool was_caching_;
};

}  // namespace coil
