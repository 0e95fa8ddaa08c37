// coil tensors to and from DLPack's, without copies: the memory stays where it is, owned by
// whoever made it until the last tensor over it goes.
#pragma once

#include <dlpack/dlpack.h>

#include <coil/tensor.h>

namespace coil::capi {

// A tensor over `managed`'s memory, which it now owns: the deleter runs when the last coil
// tensor over that memory goes. `expected` (the placeholder's dtype) settles what DLPack cannot
// say: bool exported as 8-bit unsigned. A dtype or device coil does not have is a coil::Error
// naming it, and the tensor is then freed.
Tensor from_dlpack(DLManagedTensor* managed, DType expected);

// `t` as a DLPack tensor the caller owns (its deleter releases coil's reference); bool as
// 8-bit unsigned, the form every consumer takes.
DLManagedTensor* to_dlpack(const Tensor& t);

}  // namespace coil::capi
