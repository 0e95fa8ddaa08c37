// Declarations of every op's meta function and eager kernel, for the src/ops/<family>.cpp files
// that define them and the registry that tables them.
#pragma once

#include "graph/registry.h"

namespace coil::ops {

#define COIL_OP(name, kind, schema)                   \
  std::vector<TensorMeta> meta_##name(const Args& a); \
  std::vector<Tensor> eager_##name(const Args& a, const std::vector<TensorMeta>& out);
#include "graph/op_list.def"
#undef COIL_OP

}  // namespace coil::ops
