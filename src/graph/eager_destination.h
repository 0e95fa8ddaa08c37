// An in-place method's tensor, offered to the eager kernel of the one op the method calls: a
// kernel that can write its result straight there (the GPU's compiled one-op graphs) takes it,
// and the method's copy then has nothing to do (one launch, as PyTorch's in-place kernels).
#pragma once

#include <optional>

#include "graph/registry.h"
#include "runtime/tensor_impl.h"

namespace coil {

// Offers `self` to op `op` for the scope's life, on this thread; taken at most once.
class EagerDestination {
 public:
  EagerDestination(OpId op, const Tensor& self);
  ~EagerDestination();
  EagerDestination(const EagerDestination&) = delete;
  EagerDestination& operator=(const EagerDestination&) = delete;
  // The offered tensor when `op` is the op it was offered to (once).
  static std::optional<Tensor> take(OpId op);
};

}  // namespace coil
