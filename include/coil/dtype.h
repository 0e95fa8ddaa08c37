// Element types, their names and PyTorch's type-promotion rules.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace coil {

enum class DType : uint8_t { Bool, UInt8, Int8, Int32, Int64, Float16, BFloat16, Float32, Float64 };
inline constexpr int kNumDTypes = 9;

inline constexpr DType kBool = DType::Bool;
inline constexpr DType kUInt8 = DType::UInt8;
inline constexpr DType kByte = DType::UInt8;
inline constexpr DType kInt8 = DType::Int8;
inline constexpr DType kChar = DType::Int8;
inline constexpr DType kInt32 = DType::Int32;
inline constexpr DType kInt = DType::Int32;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kLong = DType::Int64;
inline constexpr DType kFloat16 = DType::Float16;
inline constexpr DType kHalf = DType::Float16;
inline constexpr DType kBFloat16 = DType::BFloat16;
inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kDouble = DType::Float64;

size_t itemsize(DType t);
const char* dtype_name(DType t);                 // "float32", as torch prints it
const char* dtype_short_name(DType t);           // "f32", as graph annotations print it
DType dtype_from_name(const std::string& name);  // accepts both forms; throws coil::Error
inline bool is_floating(DType t) { return t >= DType::Float16; }
inline bool is_integral(DType t, bool include_bool = false) {
  return (t >= DType::UInt8 && t <= DType::Int64) || (include_bool && t == DType::Bool);
}
inline bool is_reduced_float(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

// PyTorch's promote_types: bool < integers < floating; uint8+int8 widens to int32 (coil has
// no int16); float16+bfloat16 widens to float32.
DType promote_types(DType a, DType b);

// IEEE half precision, stored as bits; arithmetic happens in float.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f);  // NOLINT: implicit like a number
  operator float() const;
};

// bfloat16: the top half of a float32, rounded to nearest even.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) {  // NOLINT
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      bits = 0x7fc0;  // NaN
    } else {
      bits = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
  }
  operator float() const {
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

template <typename T>
struct DTypeOf;
#define COIL_DTYPE_OF(T, D)           \
  template <>                         \
  struct DTypeOf<T> {                 \
    static constexpr DType value = D; \
  };
COIL_DTYPE_OF(bool, DType::Bool)
COIL_DTYPE_OF(uint8_t, DType::UInt8)
COIL_DTYPE_OF(int8_t, DType::Int8)
COIL_DTYPE_OF(int32_t, DType::Int32)
COIL_DTYPE_OF(int64_t, DType::Int64)
COIL_DTYPE_OF(Half, DType::Float16)
COIL_DTYPE_OF(BFloat16, DType::BFloat16)
COIL_DTYPE_OF(float, DType::Float32)
COIL_DTYPE_OF(double, DType::Float64)
#undef COIL_DTYPE_OF
template <typename T>
inline constexpr DType dtype_of = DTypeOf<T>::value;

}  // namespace coil
