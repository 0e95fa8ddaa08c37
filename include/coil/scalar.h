// A plain number passed to an op: `x * 0.5`, `clamp(x, 0, 6)`, `full({2}, 7)`.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include <coil/dtype.h>

namespace coil {

class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Float };
  Scalar() : Scalar(int64_t{0}) {}
  template <typename T,
            std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int), i_(static_cast<int64_t>(v)) {}  // NOLINT
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(Kind::Float), d_(static_cast<double>(v)) {}  // NOLINT
  Scalar(bool v) : kind_(Kind::Bool), i_(v) {}                     // NOLINT
  Scalar(Half v) : Scalar(static_cast<float>(v)) {}                // NOLINT
  Scalar(BFloat16 v) : Scalar(static_cast<float>(v)) {}            // NOLINT

  Kind kind() const { return kind_; }
  bool is_floating() const { return kind_ == Kind::Float; }
  bool is_integral() const { return kind_ == Kind::Int; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  double to_double() const { return kind_ == Kind::Float ? d_ : static_cast<double>(i_); }
  int64_t to_int() const { return kind_ == Kind::Float ? static_cast<int64_t>(d_) : i_; }
  bool to_bool() const { return kind_ == Kind::Float ? d_ != 0 : i_ != 0; }
  template <typename T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>)
      return to_bool();
    else if constexpr (std::is_integral_v<T>)
      return static_cast<T>(to_int());
    else if constexpr (std::is_floating_point_v<T>)
      return static_cast<T>(to_double());
    else
      return T(static_cast<float>(to_double()));  // Half, BFloat16
  }
  // The dtype a bare number of this kind gets: bool, int64 or float32 (the default dtype).
  DType default_dtype() const {
    return kind_ == Kind::Bool ? kBool : kind_ == Kind::Int ? kInt64 : kFloat32;
  }
  std::string str() const;  // "1", "0.5", "True", "inf"
  bool operator==(const Scalar& o) const {
    return kind_ == o.kind_ && (kind_ == Kind::Float ? d_ == o.d_ : i_ == o.i_);
  }

 private:
  Kind kind_;
  int64_t i_ = 0;
  double d_ = 0;
};

}  // namespace coil
