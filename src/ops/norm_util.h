// Helpers shared by the normalisation, loss, embedding and dropout kernels (norm.cpp,
// norm_embedding_dropout.cpp, loss.cpp): dtype checks, element access in double precision,
// loss reductions.
#pragma once

#include <string>

#include "ops/meta_util.h"
#include "runtime/convert.h"

namespace coil::ops::norm_detail {

// These ops are defined on real numbers only: integer and bool tensors are rejected.
inline void check_floating(const Tensor& t, const char* op, const char* what) {
  COIL_CHECK(is_floating(t.dtype()), op, ": expected a floating-point ", what, ", got ",
             describe(t), "; convert it with .to(coil::kFloat32) first");
}

// Elements are read into double and rounded back once, so 16-bit inputs lose nothing to
// intermediate rounding.
template <typename T>
inline double load(T v) {
  return static_cast<double>(static_cast<acc_type<T>>(v));
}
template <typename T>
inline T store(double v) {
  return convert<T>(v);
}

inline Tensor contiguous_of(const Tensor& t) { return t.is_contiguous() ? t : contiguous_copy(t); }

// A small parameter tensor (weight, bias, running statistics) as doubles in logical order;
// empty when the tensor is undefined.
inline std::vector<double> param_values(const Tensor& t) {
  return t.defined() ? t.to_vector_double() : std::vector<double>{};
}

inline int64_t prod(Shape::const_iterator begin, Shape::const_iterator end) {
  int64_t p = 1;
  for (auto it = begin; it != end; ++it) p *= *it;
  return p;
}

enum class Reduction { None, Mean, Sum };

inline Reduction parse_reduction(const std::string& s, const char* op) {
  if (s == "none") return Reduction::None;
  if (s == "mean") return Reduction::Mean;
  COIL_CHECK(s == "sum", op, ": reduction must be \"none\", \"mean\" or \"sum\", got \"", s, "\"");
  return Reduction::Sum;
}

}  // namespace coil::ops::norm_detail
