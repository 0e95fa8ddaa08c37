#include "backends/backend.h"

#include <coil/error.h>

#include "backends/cpu/cpu_backend.h"

namespace coil::backends {

const DeviceBackend& backend_for(Device device) {
  static const cpu::CpuBackend cpu;
  if (device.is_cpu()) return cpu;
  throw Error("coil::compile: no compiler backend for device " + device.str() +
              "; compile graphs whose tensors are on the CPU");
}

}  // namespace coil::backends
