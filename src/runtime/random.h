// The default random generator (coil::manual_seed) and the fills the random ops use.
//
// The generator is counter-based, as PyTorch's on the GPU: Philox-4x32-10 keyed by the seed.
// A fill of n elements reserves n counters from the generator's offset, and element i of the
// fill (in logical order) is a function of (seed, offset + i) alone. So draws are computed in
// parallel, on the CPU or on a device, and the same seed gives the same numbers everywhere:
// uniform and integer draws bit for bit, normal draws to the last bit of the device's log and
// cos (within an ulp of float64).
#pragma once

#include <array>
#include <cstdint>

#include "runtime/tensor_impl.h"

namespace coil {

void fill_uniform(const Tensor& dst, double low, double high);  // [low, high)
void fill_normal(const Tensor& dst, double mean, double stddev);
void fill_randint(const Tensor& dst, int64_t low, int64_t high);  // [low, high)

// The counters the default generator has handed out so far (a CUDA graph that draws would draw
// the same numbers at every replay: coil does not record one).
uint64_t random_counters_used();

enum class Distribution : uint8_t { uniform, normal, integer };

// One fill's draws: what element i is drawn from and how it becomes a float64.
struct RandomDraws {
  Distribution kind;
  uint64_t seed;
  uint64_t offset;    // the first element's counter
  double a, b;        // uniform: [a, b); normal: mean a, standard deviation b
  int64_t low, high;  // integer: [low, high)
  bool below_float;   // uniform into float32: never round up to b
};

// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"): four 32-bit
// words from a 128-bit counter (here the 64-bit `counter` and zeros) and a 64-bit key.
std::array<uint32_t, 4> philox(uint64_t counter, uint64_t key);
// Element `i` of `d` (the device kernels compute the same in their own source).
double draw(const RandomDraws& d, uint64_t i);

}  // namespace coil
