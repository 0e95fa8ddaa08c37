#include "backends/cuda/cudnn_calls.h"

#include <coil/error.h>

#if __has_include(<cudnn.h>)
#include <dlfcn.h>

#include <map>
#include <mutex>

#include "backends/cuda/cudnn_library.h"
#include "runtime/copy.h"
#include "runtime/cuda_runtime.h"
#include "runtime/tensor_impl.h"

namespace coil::cuda {

namespace {

// Loaded on first use, or nullptr with the reason in `why`. The front library loads its parts
// by name; loading them first, from the toolkit's folder, lets it find them where that folder
// is not on the loader's path.
const Dnn* load(std::string* why) {
  static std::string reason;
  static const Dnn* lib = []() -> const Dnn* {
    for (const char* part :
         {"graph", "ops", "cnn", "heuristic", "engines_precompiled", "engines_runtime_compiled"})
      dlopen((std::string(COIL_CUDA_LIB_DIR "/libcudnn_") + part + ".so.9").c_str(),
             RTLD_NOW | RTLD_GLOBAL);
    void* h = dlopen(COIL_CUDA_LIB_DIR "/libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      reason = dlerror();
      return nullptr;
    }
    auto* d = new Dnn;
    bool complete = true;
    auto sym = [&](const char* name) {
      void* p = dlsym(h, name);
      if (!p) {
        reason = std::string("cuDNN has no ") + name;
        complete = false;
      }
      return p;
    };
#define COIL_DNN(field, name) d->field = reinterpret_cast<decltype(d->field)>(sym(#name))
    COIL_DNN(error_string, cudnnGetErrorString);
    COIL_DNN(create, cudnnCreate);
    COIL_DNN(set_stream, cudnnSetStream);
    COIL_DNN(tensor_create, cudnnCreateTensorDescriptor);
    COIL_DNN(tensor_set, cudnnSetTensorNdDescriptor);
    COIL_DNN(tensor_destroy, cudnnDestroyTensorDescriptor);
    COIL_DNN(filter_create, cudnnCreateFilterDescriptor);
    COIL_DNN(filter_set, cudnnSetFilterNdDescriptor);
    COIL_DNN(filter_destroy, cudnnDestroyFilterDescriptor);
    COIL_DNN(conv_create, cudnnCreateConvolutionDescriptor);
    COIL_DNN(conv_set, cudnnSetConvolutionNdDescriptor);
    COIL_DNN(conv_groups, cudnnSetConvolutionGroupCount);
    COIL_DNN(conv_math, cudnnSetConvolutionMathType);
    COIL_DNN(conv_destroy, cudnnDestroyConvolutionDescriptor);
    COIL_DNN(forward_algos, cudnnGetConvolutionForwardAlgorithm_v7);
    COIL_DNN(forward, cudnnConvolutionForward);
    COIL_DNN(data_algos, cudnnGetConvolutionBackwardDataAlgorithm_v7);
    COIL_DNN(backward_data, cudnnConvolutionBackwardData);
    COIL_DNN(filter_algos, cudnnGetConvolutionBackwardFilterAlgorithm_v7);
    COIL_DNN(backward_filter, cudnnConvolutionBackwardFilter);
    COIL_DNN(add_tensor, cudnnAddTensor);
    COIL_DNN(pool_create, cudnnCreatePoolingDescriptor);
    COIL_DNN(pool_set, cudnnSetPooling2dDescriptor);
    COIL_DNN(pool_destroy, cudnnDestroyPoolingDescriptor);
    COIL_DNN(pool_forward, cudnnPoolingForward);
    COIL_DNN(pool_backward, cudnnPoolingBackward);
    COIL_DNN(backend_create, cudnnBackendCreateDescriptor);
    COIL_DNN(backend_destroy, cudnnBackendDestroyDescriptor);
    COIL_DNN(backend_set, cudnnBackendSetAttribute);
    COIL_DNN(backend_get, cudnnBackendGetAttribute);
    COIL_DNN(backend_finalize, cudnnBackendFinalize);
    COIL_DNN(backend_execute, cudnnBackendExecute);
#undef COIL_DNN
    return complete ? d : nullptr;
  }();
  if (why) *why = reason;
  return lib;
}

}  // namespace

bool cudnn_available() { return load(nullptr) != nullptr; }

const Dnn& dnn() {
  std::string why;
  const Dnn* d = load(&why);
  COIL_CHECK(d,
             "cuDNN (convolutions and pooling on the GPU): cannot load it (libcudnn.so.9): ", why,
             "; install the CUDA toolkit's cuDNN or add its folder to LD_LIBRARY_PATH");
  return *d;
}

void check_dnn(cudnnStatus_t s, const char* what) {
  COIL_CHECK(s == CUDNN_STATUS_SUCCESS, "cuDNN on the GPU: ", what,
             " failed: ", dnn().error_string(s));
}

// Kept for the process; its work goes to the calling thread's current stream.
cudnnHandle_t handle(int device) {
  static std::mutex mutex;
  static auto* handles = new std::map<int, cudnnHandle_t>();
  std::lock_guard<std::mutex> lock(mutex);
  cudnnHandle_t& h = (*handles)[device];
  if (!h) {
    set_device(device);
    check_dnn(dnn().create(&h), "cudnnCreate");
  }
  check_dnn(dnn().set_stream(h, static_cast<cudaStream_t>(stream(device))), "cudnnSetStream");
  return h;
}

cudnnDataType_t data_type(DType t) {
  switch (t) {
    case DType::Float32:
      return CUDNN_DATA_FLOAT;
    case DType::Float64:
      return CUDNN_DATA_DOUBLE;
    case DType::Float16:
      return CUDNN_DATA_HALF;
    case DType::BFloat16:
      return CUDNN_DATA_BFLOAT16;
    default:
      throw Error(std::string("cuDNN on the GPU: ") + dtype_name(t) +
                  " is not supported; use a floating dtype");
  }
}

Tensor in_layout(const Tensor& t, DnnLayout layout) {
  if (layout == DnnLayout::nchw ? t.is_contiguous()
                                : t.is_contiguous(MemoryFormat::ChannelsLast))  // size-1 dims aside
    return t;
  const Shape strides =
      layout == DnnLayout::nchw ? contiguous_strides(t.sizes()) : channels_last_strides(t.sizes());
  return empty_from_meta({t.dtype(), t.sizes(), strides, 0, t.device()});
}

Tensor dense(const Tensor& t, DnnLayout layout) {
  Tensor r = in_layout(t, layout);
  if (!r.is_same(t)) copy_into(r, t);
  return r;
}

bool is_nhwc(const Tensor& t) { return t.dim() == 4 && t.impl()->meta.is_channels_last(); }
const void* ptr(const Tensor& t) { return t.impl()->data(); }
void* mut_ptr(const Tensor& t) { return t.impl()->data(); }

}  // namespace coil::cuda

#else  // a toolkit without cuDNN: convolutions and pooling stay on the CPU

namespace coil::cuda {

bool cudnn_available() { return false; }

namespace {
[[noreturn]] void no_cudnn() {
  throw Error("cuDNN on the GPU: coil was built without cuDNN (no cudnn.h in the CUDA toolkit)");
}
}  // namespace

void conv2d_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const ConvWindow&) {
  no_cudnn();
}
void conv2d_input_grad(const Tensor&, const Tensor&, const Tensor&, const ConvWindow&) {
  no_cudnn();
}
void conv2d_weight_grad(const Tensor&, const Tensor&, const Tensor&, const ConvWindow&) {
  no_cudnn();
}
void pool2d_forward(const Tensor&, const Tensor&, const PoolWindow&) { no_cudnn(); }
void pool2d_backward(const Tensor&, const Tensor&, const Tensor&, const PoolWindow&) { no_cudnn(); }

}  // namespace coil::cuda

#endif
