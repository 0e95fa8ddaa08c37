// The activation a matrix product applies to its result before storing it (addmm_relu,
// addmm_gelu): oneDNN fuses it into the product's kernel, so each block of the result is
// activated while it is still in registers; every other path runs apply_epilogue over the
// stored result.
#pragma once

#include <cstdint>

#include <coil/dtype.h>

namespace coil {

enum class Epilogue {
  none,
  relu,       // max(x, 0); NaN and -0.0 pass through
  gelu_erf,   // 0.5 x (1 + erf(x / sqrt(2)))
  gelu_tanh,  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
};

// C = epilogue(C) for the m x n matrix C with row stride ldc and column stride 1, computed in
// the dtype's accumulation type. gelu on an integer dtype is an InternalError (the ops' meta
// functions reject it).
void apply_epilogue(DType dtype, Epilogue epilogue, void* c, int64_t m, int64_t n, int64_t ldc);

}  // namespace coil
