// coil's floating-point dtypes as oneDNN's memory data types (float32 for any other).
#pragma once

#include <dnnl.hpp>

#include <coil/dtype.h>

namespace coil {

inline dnnl::memory::data_type onednn_data_type(DType t) {
  using dt = dnnl::memory::data_type;
  return t == kBFloat16 ? dt::bf16 : t == kFloat16 ? dt::f16 : dt::f32;
}

}  // namespace coil
