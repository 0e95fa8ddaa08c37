// A float32 row's softmax in place, vectorised for the widest vectors the CPU has (chosen
// when the library loads), for eager kernels that cannot wait for generated code: the fused
// attention kernel's rows. Like the generated softmax, it never computes with subnormal
// numbers (see softmax_row.cpp).
#pragma once

#include <cstdint>
#include <vector>

namespace coil {

// x[0, n) = softmax(x[0, n) * scale), except that a row of -inf alone gives zeros (attention's
// "safe" softmax: nothing to attend to) rather than NaN, and that results below FLT_MIN are 0.
// Those are attention weights that go on into a product with the values, where each subnormal
// operand costs the multiply-add a microcode assist (attention with widely spread scores ran
// several times slower than with scores 0; bench/probes/softmax_denormals.c measures the cost), and
// where such a weight moves an output, a weighted mean of the values, by less than 2^-126 times
// their largest magnitude. A NaN or +inf makes the row NaN, as in softmax.
void softmax_row(float* x, int64_t n, float scale);

// Each implementation this CPU can run (AVX-512, AVX2, one lane), by name, so that tests
// reach the ones softmax_row does not pick here.
struct SoftmaxRowVariant {
  const char* name;
  void (*fn)(float* x, int64_t n, float scale);
};
std::vector<SoftmaxRowVariant> softmax_row_variants();

}  // namespace coil
