#include <coil/dtype.h>

#include <coil/error.h>

namespace coil {

namespace {
struct DTypeInfo {
  const char* name;
  const char* short_name;
  size_t size;
};
constexpr DTypeInfo kInfo[kNumDTypes] = {
    {"bool", "b8", 1},       {"uint8", "u8", 1},    {"int8", "i8", 1},
    {"int32", "i32", 4},     {"int64", "i64", 8},   {"float16", "f16", 2},
    {"bfloat16", "bf16", 2}, {"float32", "f32", 4}, {"float64", "f64", 8},
};
const DTypeInfo& info(DType t) { return kInfo[static_cast<int>(t)]; }
}  // namespace

size_t itemsize(DType t) { return info(t).size; }
const char* dtype_name(DType t) { return info(t).name; }
const char* dtype_short_name(DType t) { return info(t).short_name; }

DType dtype_from_name(const std::string& name) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (name == kInfo[i].name || name == kInfo[i].short_name) return static_cast<DType>(i);
  }
  if (name == "float" || name == "half" || name == "double" || name == "long" || name == "int") {
    static const char* aliases[][2] = {{"float", "float32"},
                                       {"half", "float16"},
                                       {"double", "float64"},
                                       {"long", "int64"},
                                       {"int", "int32"}};
    for (auto& a : aliases)
      if (name == a[0]) return dtype_from_name(a[1]);
  }
  throw Error("unknown dtype '" + name +
              "': expected one of bool, uint8, int8, int32, int64, float16, bfloat16, float32, "
              "float64 (or b8, u8, i8, i32, i64, f16, bf16, f32, f64)");
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  bool fa = is_floating(a), fb = is_floating(b);
  if (fa != fb) return fa ? a : b;
  if (fa) {
    if (is_reduced_float(a) && is_reduced_float(b)) return kFloat32;  // f16 + bf16
    return a > b ? a : b;
  }
  // Both integral. uint8 with a signed type: the signed type must hold 0..255.
  if (a == DType::UInt8 || b == DType::UInt8) {
    DType other = a == DType::UInt8 ? b : a;
    return other == DType::Int8 ? kInt32 : other;
  }
  return a > b ? a : b;
}

// IEEE binary16 <-> binary32, round to nearest even, with subnormals, infinities and NaN.
Half::Half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {  // inf or NaN
    bits = static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0));
    return;
  }
  if (absx >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
    bits = static_cast<uint16_t>(sign | 0x7c00u);
    return;
  }
  if (absx < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    // Scale into the subnormal range with float arithmetic, which rounds to nearest even.
    float a;
    std::memcpy(&a, &absx, 4);
    float scaled = a * 16777216.0f;  // 2^24: one subnormal half ulp becomes 1.0
    uint32_t m = static_cast<uint32_t>(scaled);
    float rem = scaled - static_cast<float>(m);
    if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
    bits = static_cast<uint16_t>(sign | m);
    return;
  }
  uint32_t mant_odd = (absx >> 13) & 1u;
  absx += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
  bits = static_cast<uint16_t>(sign | (absx >> 13));
}

Half::operator float() const {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t mant = bits & 0x3ffu;
  uint32_t out;
  if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {  // subnormal: value = mant * 2^-24
      float f = static_cast<float>(mant) * 5.9604644775390625e-8f;
      std::memcpy(&out, &f, 4);
      out |= sign;
    }
  } else if (exp == 31) {
    out = sign | 0x7f800000u | (mant << 13);
  } else {
    out = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &out, 4);
  return f;
}

}  // namespace coil
