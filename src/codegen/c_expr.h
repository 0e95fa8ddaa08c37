// What the C-like backends (C++ on the CPU, CUDA C++ on the GPU) print alike: the C types values
// compute in, literals, and each IR op as a scalar expression over its operands' texts. Each
// backend names its own math functions and non-finite literals (a CDialect): GCC's builtins in
// the CPU's header-free source, CUDA's device math library on the GPU.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <coil/scalar.h>

#include "ir/value.h"

namespace coil::codegen {

struct CDialect {
  const char* math;   // prefix of C math functions: "__builtin_" ("__builtin_expf")
  const char* nan_f;  // a float NaN
  const char* inf_f;  // float infinity
  const char* nan_d;  // a double NaN
  const char* inf_d;  // double infinity
};

// The C type a value of `t` is computed in (16-bit floats compute in float; i64 and the small
// integer types are the prelude's typedefs).
const char* compute_type(DType t);

// A C literal of `s` in `dtype`'s compute type.
std::string c_literal(const Scalar& s, DType dtype, const CDialect& d);

// The lowest (or highest) value of `dtype` as a C literal: minus (or plus) infinity for floats,
// the type's extreme for integers — where a max (or min) reduction starts.
std::string c_extreme(DType dtype, bool lowest, const CDialect& d);

// `v` (not a load, constant, index or cast) as a C expression over its operands' texts `x`.
std::string scalar_op(const ir::ValueNode& v, const std::vector<std::string>& x, const CDialect& d);

// `form` with $a, $b, $c replaced by the operands `x`, @ by extra['@'], $k (one character) or
// $word (its first letter) by extra[k].
std::string expand_form(const char* form, const std::vector<std::string>& x,
                        const std::map<char, std::string>& extra);

}  // namespace coil::codegen
