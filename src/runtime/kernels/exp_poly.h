// The generated code's exp (codegen/cpp_prelude.cpp), 2 ulp, for the eager kernels' vectors
// (GCC vector types of any width): e^c = p * 2^nf, the caller clamping c to its range and
// building 2^nf in the exponent bits it needs.
#pragma once

namespace coil {

template <typename V>
__attribute__((always_inline)) inline V exp_parts(V c, V& nf) {
  nf = (c * 1.44269502f + 12582912.0f) - 12582912.0f;
  V r = (c - nf * 0.693359375f) - nf * -2.12194442e-04f;
  V q = V{} + 0.001392617612f;
  q = q * r + 0.008363173075f;
  q = q * r + 0.04166655466f;
  q = q * r + 0.1666657703f;
  q = q * r + 0.5f;
  return (1.0f + r) + (r * r) * q;
}

}  // namespace coil
