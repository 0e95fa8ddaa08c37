#include "runtime/device_kernels.h"

#include <coil/error.h>

namespace coil {

namespace {
DeviceKernels cuda_kernels;  // constant-initialised: empty until the CUDA backend installs them
}  // namespace

void install_device_kernels(DeviceType device, const DeviceKernels& kernels) {
  COIL_ASSERT(device == DeviceType::CUDA, "device kernels are for the GPU");
  cuda_kernels = kernels;
}

const DeviceKernels& device_kernels(DeviceType device, const char* what) {
  COIL_ASSERT(device == DeviceType::CUDA, "device kernels are for the GPU");
  COIL_CHECK(cuda_kernels.copy && cuda_kernels.fill, what,
             ": coil was built without CUDA (no CUDA toolkit was found when it was configured)");
  return cuda_kernels;
}

}  // namespace coil
