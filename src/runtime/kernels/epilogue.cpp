#include "runtime/kernels/epilogue.h"

#include <cmath>
#include <type_traits>

#include <coil/error.h>

#include "runtime/dispatch_dtype.h"
#include "runtime/loops.h"

namespace coil {

namespace {

template <typename A>
A activate(Epilogue e, A x) {
  if (e == Epilogue::relu) return x < A(0) ? A(0) : x;  // NaN and -0.0 compare false: kept
  if constexpr (std::is_floating_point_v<A>) {
    if (e == Epilogue::gelu_erf) return A(0.5) * x * (A(1) + std::erf(x * A(0.7071067811865476)));
    if (e == Epilogue::gelu_tanh) {
      const A k = A(0.7978845608028654);  // sqrt(2 / pi)
      return A(0.5) * x * (A(1) + std::tanh(k * (x + A(0.044715) * x * x * x)));
    }
  }
  return x;
}

}  // namespace

void apply_epilogue(DType dtype, Epilogue epilogue, void* c, int64_t m, int64_t n, int64_t ldc) {
  if (epilogue == Epilogue::none || m == 0 || n == 0) return;
  dispatch_dtype(dtype, [&]<typename T>() {
    using A = acc_type<T>;
    if constexpr (std::is_same_v<T, bool>) {
      COIL_ASSERT(false, "a product's epilogue on bool");
    } else {
      COIL_ASSERT(epilogue == Epilogue::relu || std::is_floating_point_v<A>,
                  "gelu epilogue on an integer dtype");
      T* p = static_cast<T*>(c);
      auto row = [&](int64_t i) {
        T* r = p + i * ldc;
        for (int64_t j = 0; j < n; ++j)
          r[j] = static_cast<T>(activate(epilogue, static_cast<A>(r[j])));
      };
      if (m > 1 && m * n >= kParallelGrain) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < m; ++i) row(i);
      } else {
        for (int64_t i = 0; i < m; ++i) row(i);
      }
    }
  });
}

}  // namespace coil
