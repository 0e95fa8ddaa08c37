// Calling a templated kernel for a runtime dtype: dispatch_dtype(t, [&]<typename T>() {...}).
#pragma once

#include <coil/dtype.h>
#include <coil/error.h>

namespace coil {

// The type arithmetic on T happens in: float for the 16-bit floats, T otherwise.
template <typename T>
struct AccType {
  using type = T;
};
template <>
struct AccType<Half> {
  using type = float;
};
template <>
struct AccType<BFloat16> {
  using type = float;
};
template <typename T>
using acc_type = typename AccType<T>::type;

template <typename F>
decltype(auto) dispatch_dtype(DType t, F&& f) {
  switch (t) {
    case DType::Bool:
      return f.template operator()<bool>();
    case DType::UInt8:
      return f.template operator()<uint8_t>();
    case DType::Int8:
      return f.template operator()<int8_t>();
    case DType::Int32:
      return f.template operator()<int32_t>();
    case DType::Int64:
      return f.template operator()<int64_t>();
    case DType::Float16:
      return f.template operator()<Half>();
    case DType::BFloat16:
      return f.template operator()<BFloat16>();
    case DType::Float32:
      return f.template operator()<float>();
    case DType::Float64:
      return f.template operator()<double>();
  }
  throw InternalError("dispatch_dtype: bad dtype");
}

// Only the floating types; the caller has checked (or converted) already.
template <typename F>
decltype(auto) dispatch_floating(DType t, F&& f) {
  switch (t) {
    case DType::Float16:
      return f.template operator()<Half>();
    case DType::BFloat16:
      return f.template operator()<BFloat16>();
    case DType::Float32:
      return f.template operator()<float>();
    case DType::Float64:
      return f.template operator()<double>();
    default:
      throw InternalError("dispatch_floating: not a floating dtype");
  }
}

}  // namespace coil
