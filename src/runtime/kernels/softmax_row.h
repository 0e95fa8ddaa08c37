// A float32 row's softmax in place, vectorised with SLEEF's exp for the widest vectors the
// CPU has (chosen when the library loads), for eager kernels that cannot wait for generated
// code: the fused attention kernel's rows.
#pragma once

#include <cstdint>
#include <vector>

namespace coil {

// x[0, n) = softmax(x[0, n) * scale), except that a row of -inf alone gives zeros (attention's
// "safe" softmax: nothing to attend to) rather than NaN. A NaN or +inf makes the row NaN, as in
// softmax.
void softmax_row(float* x, int64_t n, float scale);

// Each implementation this CPU can run (AVX-512, AVX2, one lane), by name, so that tests
// reach the ones softmax_row does not pick here.
struct SoftmaxRowVariant {
  const char* name;
  void (*fn)(float* x, int64_t n, float scale);
};
std::vector<SoftmaxRowVariant> softmax_row_variants();

}  // namespace coil
