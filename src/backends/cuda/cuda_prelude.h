// The text every CUDA compile unit starts with. NVRTC is given no include path, so the source
// includes nothing: the prelude declares the types and helpers the generated kernels use (the
// CPU prelude's scalar helpers in device code, 16-bit float conversions, block reductions).
#pragma once

#include <string>

namespace coil::cuda {

const std::string& cuda_prelude();

}  // namespace coil::cuda
