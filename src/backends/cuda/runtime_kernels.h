// The runtime's own GPU kernels (runtime/device_kernels.h), installed when coil's library loads:
// copies and fills per pair of dtypes, and the random draws. Their sources are here for the
// tests that compile them with NVRTC where there is no GPU.
#pragma once

#include <string>

#include <coil/dtype.h>

namespace coil::cuda {

std::string copy_kernel_source(DType dst, DType src);  // coil_copy and coil_fill
std::string random_kernel_source();                    // coil_random

}  // namespace coil::cuda
