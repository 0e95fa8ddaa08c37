// Temporary: ops declared in op_list.def whose kernels are being written. Calling one is a
// clear coil::Error. This file goes away when the last op is implemented.
#pragma once

#include "ops/meta_util.h"

#define COIL_PENDING(name)                                                                  \
  std::vector<TensorMeta> meta_##name(const Args&) {                                        \
    throw Error(#name ": not implemented yet");                                             \
  }                                                                                         \
  std::vector<Tensor> eager_##name(const Args&, const std::vector<TensorMeta>&) {           \
    throw Error(#name ": not implemented yet");                                             \
  }
