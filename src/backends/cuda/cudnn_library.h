// What coil's cuDNN calls share (backends/cuda/cudnn_conv.cpp, cudnn_pool.cpp, cudnn_graph.cpp):
// the library's entry points, loaded on first use; a handle per device on coil's stream;
// descriptors of 4-D tensors, NCHW or NHWC. Included only where the toolkit has cudnn.h.
#pragma once

#include <cudnn.h>

#include <array>
#include <climits>
#include <cstdint>

#include <coil/error.h>
#include <coil/tensor.h>

namespace coil::cuda {

struct Dnn {
  decltype(&cudnnGetErrorString) error_string;
  decltype(&cudnnCreate) create;
  decltype(&cudnnSetStream) set_stream;
  decltype(&cudnnCreateTensorDescriptor) tensor_create;
  decltype(&cudnnSetTensorNdDescriptor) tensor_set;
  decltype(&cudnnDestroyTensorDescriptor) tensor_destroy;
  decltype(&cudnnCreateFilterDescriptor) filter_create;
  decltype(&cudnnSetFilterNdDescriptor) filter_set;
  decltype(&cudnnDestroyFilterDescriptor) filter_destroy;
  decltype(&cudnnCreateConvolutionDescriptor) conv_create;
  decltype(&cudnnSetConvolutionNdDescriptor) conv_set;
  decltype(&cudnnSetConvolutionGroupCount) conv_groups;
  decltype(&cudnnSetConvolutionMathType) conv_math;
  decltype(&cudnnDestroyConvolutionDescriptor) conv_destroy;
  decltype(&cudnnGetConvolutionForwardAlgorithm_v7) forward_algos;
  decltype(&cudnnConvolutionForward) forward;
  decltype(&cudnnGetConvolutionBackwardDataAlgorithm_v7) data_algos;
  decltype(&cudnnConvolutionBackwardData) backward_data;
  decltype(&cudnnGetConvolutionBackwardFilterAlgorithm_v7) filter_algos;
  decltype(&cudnnConvolutionBackwardFilter) backward_filter;
  decltype(&cudnnAddTensor) add_tensor;
  decltype(&cudnnCreatePoolingDescriptor) pool_create;
  decltype(&cudnnSetPooling2dDescriptor) pool_set;
  decltype(&cudnnDestroyPoolingDescriptor) pool_destroy;
  decltype(&cudnnPoolingForward) pool_forward;
  decltype(&cudnnPoolingBackward) pool_backward;
  // The graph API's (cudnn_graph.h).
  decltype(&cudnnBackendCreateDescriptor) backend_create;
  decltype(&cudnnBackendDestroyDescriptor) backend_destroy;
  decltype(&cudnnBackendSetAttribute) backend_set;
  decltype(&cudnnBackendGetAttribute) backend_get;
  decltype(&cudnnBackendFinalize) backend_finalize;
  decltype(&cudnnBackendExecute) backend_execute;
};

const Dnn& dnn();
// coil::Error naming `what` unless `s` is success.
void check_dnn(cudnnStatus_t s, const char* what);
// The handle of `device`, on coil's stream there.
cudnnHandle_t handle(int device);
cudnnDataType_t data_type(DType t);

inline int as_int(int64_t v) {
  COIL_CHECK(v <= INT_MAX, "cuDNN on the GPU: a size of ", v,
             " exceeds cuDNN's 32-bit limit; split the input");
  return static_cast<int>(v);
}

inline std::array<int, 4> dims_of(const Tensor& t) {
  return {as_int(t.size(0)), as_int(t.size(1)), as_int(t.size(2)), as_int(t.size(3))};
}

// The two layouts coil hands cuDNN a 4-D [N, C, H, W] tensor in: NCHW (contiguous) or NHWC
// (channels-last), described by its dims alone (the canonical strides of the layout).
enum class DnnLayout : uint8_t { nchw, nhwc };

// The strides of a dense [N, C, H, W] tensor in `layout`.
inline std::array<int64_t, 4> layout_strides(const std::array<int, 4>& dims, DnnLayout layout) {
  const int64_t c = dims[1], h = dims[2], w = dims[3];
  return layout == DnnLayout::nhwc ? std::array<int64_t, 4>{h * w * c, 1, w * c, c}
                                   : std::array<int64_t, 4>{c * h * w, h * w, w, 1};
}

// A 4-D tensor as cuDNN describes it.
struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc(const std::array<int, 4>& dims, cudnnDataType_t type,
             DnnLayout layout = DnnLayout::nchw) {
    check_dnn(dnn().tensor_create(&d), "cudnnCreateTensorDescriptor");
    const std::array<int64_t, 4> s = layout_strides(dims, layout);
    const std::array<int, 4> strides = {as_int(s[0]), as_int(s[1]), as_int(s[2]), as_int(s[3])};
    check_dnn(dnn().tensor_set(d, type, 4, dims.data(), strides.data()), "describing a tensor");
  }
  ~TensorDesc() { dnn().tensor_destroy(d); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
};

// A convolution's weight [O, I, KH, KW]; NHWC is OHWI.
struct FilterDesc {
  cudnnFilterDescriptor_t d = nullptr;
  FilterDesc(const std::array<int, 4>& dims, cudnnDataType_t type,
             DnnLayout layout = DnnLayout::nchw) {
    check_dnn(dnn().filter_create(&d), "cudnnCreateFilterDescriptor");
    const cudnnTensorFormat_t format =
        layout == DnnLayout::nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    check_dnn(dnn().filter_set(d, type, format, 4, dims.data()), "describing the weight");
  }
  ~FilterDesc() { dnn().filter_destroy(d); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
};

// cuDNN's scaling factors 1 and 0, as the type it takes for `t` (double for float64).
struct OneZero {
  double d[2] = {1, 0};
  float f[2] = {1, 0};
  const void* one(DType t) const { return t == kFloat64 ? static_cast<const void*>(d) : f; }
  const void* zero(DType t) const {
    return t == kFloat64 ? static_cast<const void*>(d + 1) : f + 1;
  }
};

// t itself when dense in `layout`, else an uninitialised tensor of its sizes and dtype that is.
Tensor in_layout(const Tensor& t, DnnLayout layout);
// t itself when dense in `layout`, else a copy that is.
Tensor dense(const Tensor& t, DnnLayout layout = DnnLayout::nchw);
// Whether t is laid out NHWC (and is not also NCHW: one channel, or one pixel).
bool is_nhwc(const Tensor& t);
const void* ptr(const Tensor& t);
void* mut_ptr(const Tensor& t);

}  // namespace coil::cuda
