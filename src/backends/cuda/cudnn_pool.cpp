#include "backends/cuda/cudnn_calls.h"

#if __has_include(<cudnn.h>)
#include "backends/cuda/cudnn_library.h"
#include "runtime/cuda_runtime.h"
#include "runtime/tensor_impl.h"

namespace coil::cuda {

namespace {

struct PoolDesc {
  cudnnPoolingDescriptor_t d = nullptr;
  explicit PoolDesc(const PoolWindow& w) {
    check_dnn(dnn().pool_create(&d), "cudnnCreatePoolingDescriptor");
    const cudnnPoolingMode_t mode = w.count_include_pad
                                        ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                        : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    check_dnn(dnn().pool_set(d, mode, CUDNN_PROPAGATE_NAN, as_int(w.kernel[0]), as_int(w.kernel[1]),
                             as_int(w.padding[0]), as_int(w.padding[1]), as_int(w.stride[0]),
                             as_int(w.stride[1])),
              "describing the pooling");
  }
  ~PoolDesc() { dnn().pool_destroy(d); }
  PoolDesc(const PoolDesc&) = delete;
  PoolDesc& operator=(const PoolDesc&) = delete;
};

// A [..., H, W] tensor as cuDNN's (planes, 1, H, W): every leading dim is a plane of its own.
std::array<int, 4> planes_of(const Tensor& t) {
  const int64_t h = t.size(-2), w = t.size(-1);
  return {as_int(t.numel() / (h * w)), 1, as_int(h), as_int(w)};
}

}  // namespace

void pool2d_forward(const Tensor& x_in, const Tensor& out, const PoolWindow& w) {
  if (out.numel() == 0) return;
  const Tensor x = dense(x_in);
  const DType t = out.dtype();
  const int device = out.device().index;
  cudnnHandle_t h = handle(device);
  TensorDesc xd(planes_of(x), data_type(t)), yd(planes_of(out), data_type(t));
  PoolDesc pd(w);
  const OneZero s;
  set_device(device);
  check_dnn(dnn().pool_forward(h, pd.d, s.one(t), xd.d, ptr(x), s.zero(t), yd.d, mut_ptr(out)),
            "cudnnPoolingForward");
  note_launch(device, "cuDNN's pooling");
}

void pool2d_backward(const Tensor& gy_in, const Tensor& x_in, const Tensor& dx,
                     const PoolWindow& w) {
  if (dx.numel() == 0) return;
  const Tensor x = dense(x_in), gy = dense(gy_in);
  // cuDNN's backward takes the pool's output too.
  const Tensor y = empty_contiguous(gy.sizes(), gy.dtype(), gy.device());
  pool2d_forward(x, y, w);
  const DType t = dx.dtype();
  const int device = dx.device().index;
  cudnnHandle_t h = handle(device);
  TensorDesc xd(planes_of(x), data_type(t)), yd(planes_of(y), data_type(t));
  PoolDesc pd(w);
  const OneZero s;
  set_device(device);
  check_dnn(dnn().pool_backward(h, pd.d, s.one(t), yd.d, ptr(y), yd.d, ptr(gy), xd.d, ptr(x),
                                s.zero(t), xd.d, mut_ptr(dx)),
            "cudnnPoolingBackward");
  note_launch(device, "cuDNN's pooling gradient");
}

}  // namespace coil::cuda

#endif
