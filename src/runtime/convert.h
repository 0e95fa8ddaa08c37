// Element conversion between coil's dtypes, as PyTorch's casts do it.
#pragma once

#include "runtime/dispatch_dtype.h"

namespace coil {

template <typename Out, typename In>
inline Out convert(In x) {
  auto v = static_cast<acc_type<In>>(x);
  if constexpr (std::is_same_v<Out, bool>) {
    return v != acc_type<In>(0);
  } else if constexpr (std::is_same_v<Out, Half> || std::is_same_v<Out, BFloat16>) {
    return Out(static_cast<float>(v));
  } else {
    return static_cast<Out>(v);
  }
}

}  // namespace coil
