#include "backends/backend.h"

#include <coil/error.h>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_heuristics.h"

namespace coil::backends {

const DeviceBackend& backend_for(Device device) {
  static const cpu::CpuBackend cpu;
  if (device.is_cpu()) return cpu;
  const DeviceBackend* gpu = cuda_backend(device.index);
  COIL_CHECK(gpu, "coil::compile: a graph on ", device.str(),
             ": coil was built without CUDA (no CUDA toolkit was found when it was configured)");
  return *gpu;
}

}  // namespace coil::backends

namespace coil::heuristics {

const DeviceHeuristics& for_device(Device device) {
  return device.is_cpu() ? cpu::heuristics() : backends::cuda_heuristics();
}

}  // namespace coil::heuristics
