// cuDNN's calls on the GPU (the library loaded on first use): conv2d forward with its bias and
// its two backward ops, for float32 (full precision unless set_cudnn_allow_tf32), float64 and the
// 16-bit floats (cudnn_conv.cpp); average pooling and its gradient (cudnn_pool.cpp; max pooling
// is coil's own, max_pool.h).
// Where the toolkit has no cuDNN, cudnn_available() is false and these ops run on the CPU.
#pragma once

#include <array>

#include <coil/tensor.h>

namespace coil::cuda {

// conv2d's window: stride, padding and dilation per spatial dim, and the groups.
struct ConvWindow {
  std::array<int64_t, 2> stride, padding, dilation;
  int64_t groups;
};

// Whether coil was built with cuDNN's headers and the library loads.
bool cudnn_available();

// Each writes a contiguous result: out [N, O, OH, OW] = conv2d(x, w) + bias (bias may be
// undefined); dx [N, C, H, W], the gradient of x for the output gradient gy; dw [O, C/groups,
// kH, kW], the gradient of w. Inputs of any strides; all of one dtype, on one device.
void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out,
                    const ConvWindow& window);
void conv2d_input_grad(const Tensor& gy, const Tensor& w, const Tensor& dx,
                       const ConvWindow& window);
void conv2d_weight_grad(const Tensor& gy, const Tensor& x, const Tensor& dw,
                        const ConvWindow& window);

// An average-pooling window: kernel, stride and padding per spatial dim, counting the padding in
// the divisor or not. cuDNN has no ceil_mode: those pools stay on the CPU.
struct PoolWindow {
  std::array<int64_t, 2> kernel, stride, padding;
  bool count_include_pad;
};

// out (contiguous [..., OH, OW]) = the pool of x ([..., H, W], the leading dims planes).
void pool2d_forward(const Tensor& x, const Tensor& out, const PoolWindow& window);
// dx (contiguous, x's sizes) = the gradient of the pool of x for the output gradient gy.
void pool2d_backward(const Tensor& gy, const Tensor& x, const Tensor& dx, const PoolWindow& window);

}  // namespace coil::cuda
