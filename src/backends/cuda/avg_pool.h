// Average pooling on the GPU where cuDNN has no form of the pool (or does not load): windows
// that ceil_mode lets run past the input, and adaptive pools whose windows differ in size.
// Kernels of coil's own for the pool and its gradient, every window and count as the CPU's
// (src/ops/pool.cpp), for every dtype the CPU takes; the gradient gathers, for each input
// element, its windows' shares in the CPU's row-major window order (so it sums as the CPU does,
// without atomics).
#pragma once

#include <array>
#include <string>

#include <coil/tensor.h>

namespace coil::cuda {

struct AvgPoolWindow {
  bool adaptive;  // adaptive_avg_pool2d: the windows follow from the sizes alone
  std::array<int64_t, 2> kernel, stride, padding;
  bool count_include_pad;
};

// coil_avg_pool (each window's mean) and coil_avg_pool_grad (each input element's sum of its
// windows' gradients, each divided by its window's count).
std::string avg_pool_kernel_source(DType t);

// out (contiguous [..., oh, ow]) = the mean of each window of x ([..., h, w]).
void avg_pool2d(const Tensor& x, const Tensor& out, const AvgPoolWindow& w);
// dx (contiguous, [..., h, w]) = the gradient of that pool for the output gradient gy.
void avg_pool2d_backward(const Tensor& gy, const Tensor& dx, const AvgPoolWindow& w);

}  // namespace coil::cuda
