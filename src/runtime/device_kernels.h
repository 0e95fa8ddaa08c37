// The runtime's own kernels (copies with casts and broadcasting, fills, random draws) on a device
// other than the CPU. The runtime cannot generate GPU code itself, so the device's backend installs
// them when coil's library loads (backends/cuda/runtime_kernels.cpp for CUDA), as PyTorch registers
// a device's kernels under its dispatch key.
#pragma once

#include <coil/device.h>
#include <coil/scalar.h>
#include <coil/tensor.h>

namespace coil {

struct RandomDraws;  // runtime/random.h

struct DeviceKernels {
  // dst (any layout) = src (same device, sizes broadcasting to dst's), converted to dst's dtype.
  void (*copy)(const Tensor& dst, const Tensor& src) = nullptr;
  // Every element of dst (any layout) = value.
  void (*fill)(const Tensor& dst, const Scalar& value) = nullptr;
  // Element i of dst (float64, contiguous) = draw(d, i), as runtime/random.cpp computes it.
  void (*random)(const Tensor& dst, const RandomDraws& d) = nullptr;
};

void install_device_kernels(DeviceType device, const DeviceKernels& kernels);
// coil::Error naming `what` when the device has none (coil built without it).
const DeviceKernels& device_kernels(DeviceType device, const char* what);

}  // namespace coil
