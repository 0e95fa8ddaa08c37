// The default random generator (coil::manual_seed) and the fills the random ops use.
#pragma once

#include <cstdint>

#include "runtime/tensor_impl.h"

namespace coil {

void fill_uniform(const Tensor& dst, double low, double high);  // [low, high)
void fill_normal(const Tensor& dst, double mean, double stddev);
void fill_randint(const Tensor& dst, int64_t low, int64_t high);  // [low, high)

}  // namespace coil
