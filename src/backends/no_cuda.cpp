// The device backends of a build without a CUDA toolkit: none for CUDA.
#include "backends/backend.h"

namespace coil::backends {

const DeviceBackend* cuda_backend(int) { return nullptr; }

}  // namespace coil::backends
