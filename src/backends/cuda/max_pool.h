// Max pooling on the GPU: kernels of coil's own for the pool, its gradient and its second
// derivative, for every window (kernel, stride, padding, dilation; ceil_mode is in the output's
// size) and every dtype the CPU takes. Each window's winner is the CPU's: its first maximum, or
// its first NaN, in row-major tap order; so the gradient goes where the CPU sends it, and sums
// in the CPU's order. (cuDNN's deterministic max-pool gradient took 5.9 ms for ResNet-50's one
// pool at batch 32, where a gather over the windows' winners is a pass over memory.)
#pragma once

#include <array>
#include <string>

#include <coil/tensor.h>

namespace coil::cuda {

struct MaxPoolWindow {
  std::array<int64_t, 2> kernel, stride, padding, dilation;
};

// coil_max_pool_taps (each window's winner, and its value from a tensor shaped as the input)
// and coil_max_pool_grad (each input element's sum of the gradients of the windows it won).
std::string max_pool_kernel_source(DType t);

// out (contiguous [..., oh, ow]) = the maximum of each window of x ([..., h, w]).
void max_pool2d(const Tensor& x, const Tensor& out, const MaxPoolWindow& w);
// dx (contiguous, x's sizes) = each gradient of gy routed to its window's winner in x.
void max_pool2d_backward(const Tensor& gy, const Tensor& x, const Tensor& dx,
                         const MaxPoolWindow& w);
// out (contiguous, the pool's sizes) = grad (shaped as x) at each window's winner in x.
void max_pool2d_double_backward(const Tensor& grad, const Tensor& x, const Tensor& out,
                                const MaxPoolWindow& w);

}  // namespace coil::cuda
