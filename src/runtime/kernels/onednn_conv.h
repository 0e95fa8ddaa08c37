// Convolutions and their gradients through oneDNN's convolution primitives (as PyTorch's CPU
// convolutions are): float32, and the 16-bit floats where the CPU has kernels for them
// (bfloat16 on AVX512-BF16 and AMX, accumulating in float32 and rounding the result once). Each
// geometry has two forms: oneDNN's kernels over the NCHW tensors as they are, and its direct
// kernels over the layouts they prefer (channels blocked or last), the input and output reordered
// into and out of them around the call. The first call of a geometry times both and keeps the
// faster (docs/performance.md). The choice is the process's: as with cuDNN's benchmark mode, two
// processes may choose differently and then differ in the last bits of a result.
#pragma once

#include <array>
#include <cstdint>

#include <coil/dtype.h>

namespace coil {

// One conv2d: input (n, c, h, w), weight (o, c / groups, kh, kw), output (n, o, oh, ow).
struct ConvShape {
  int64_t n, c, h, w;
  int64_t o, kh, kw;
  int64_t oh, ow;
  int64_t groups;
  std::array<int64_t, 2> stride, pad, dil;
  // The activations (x and y, or their gradients) are NHWC (channels-last) rather than NCHW,
  // and the weight is OHWI rather than OIHW (channels-last too; one group only).
  bool channels_last = false, weights_channels_last = false;
  // Every tensor's dtype (the bias's too).
  DType dtype = kFloat32;
};

// Which weight a call reads, and which write of it (Storage::id and ::version; 0: unknown). A
// primitive that wants the weight in another layout (channels blocked) keeps the reordered copy
// while the version stays: a model's inference reorders each weight once, not on every call.
struct WeightVersion {
  uint64_t storage = 0, version = 0;
};

// y = conv2d(x, w) (+ bias, o elements, when given), every tensor contiguous. Returns false,
// touching nothing, when oneDNN has no kernel for it (for a 16-bit dtype: none but its slow
// reference code); the caller then uses float32 or its own.
bool onednn_conv2d(const ConvShape& s, const void* x, const void* w, const void* bias, void* y,
                   WeightVersion wv = {});
// Its gradients: dx from the output's gradient gy and the weight, dw from gy and the input.
bool onednn_conv2d_backward_data(const ConvShape& s, const void* gy, const void* w, void* dx,
                                 WeightVersion wv = {});
bool onednn_conv2d_backward_weights(const ConvShape& s, const void* gy, const void* x, void* dw);

// Which form the calls run: the faster by timing (the default), or one forced, for tests and for
// benchmarks that compare them (a form oneDNN cannot make falls back to the other).
enum class ConvForm { fastest, plain, preferred };
void set_onednn_conv_form(ConvForm form);

}  // namespace coil
