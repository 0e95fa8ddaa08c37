#include "capi/dlpack.h"

#include <memory>

#include <coil/error.h>

#include "runtime/tensor_impl.h"

namespace coil::capi {

namespace {

// DLPack 0.8's code for bool, which the 0.6 header lacks.
constexpr uint8_t kDLBoolCode = 6;

DType dtype_of(const DLDataType& t, DType expected) {
  COIL_CHECK(t.lanes == 1, "DLPack: tensors of ", int(t.lanes), "-lane vectors are not supported");
  const int bits = t.bits;
  switch (t.code) {
    case kDLFloat:
      if (bits == 16) return kFloat16;
      if (bits == 32) return kFloat32;
      if (bits == 64) return kFloat64;
      break;
    case kDLBfloat:
      if (bits == 16) return kBFloat16;
      break;
    case kDLInt:
      if (bits == 8) return kInt8;
      if (bits == 32) return kInt32;
      if (bits == 64) return kInt64;
      break;
    case kDLUInt:
      if (bits == 8) return expected == kBool ? kBool : kUInt8;
      break;
    case kDLBoolCode:
      if (bits == 8) return kBool;
      break;
    default:
      break;
  }
  throw Error("DLPack: a tensor of type code " + std::to_string(t.code) + " with " +
              std::to_string(bits) +
              " bits has no coil dtype (coil has bool, uint8, int8, int32, int64, float16, "
              "bfloat16, float32 and float64)");
}

DLDataType dlpack_dtype(DType t) {
  const uint8_t bits = static_cast<uint8_t>(itemsize(t) * 8);
  switch (t) {
    case kBool:  // as 8-bit unsigned, which every DLPack consumer takes (PyTorch 1.13 has no bool)
    case kUInt8:
      return {kDLUInt, 8, 1};
    case kInt8:
    case kInt32:
    case kInt64:
      return {kDLInt, bits, 1};
    case kBFloat16:
      return {kDLBfloat, 16, 1};
    default:
      return {kDLFloat, bits, 1};
  }
}

Device device_of(const DLDevice& d) {
  if (d.device_type == kDLCPU) return kCPU;
  if (d.device_type == kDLCUDA) return Device(DeviceType::CUDA, d.device_id);
  throw Error("DLPack: a tensor on device type " + std::to_string(d.device_type) +
              " (coil runs on the CPU, kDLCPU, and NVIDIA GPUs, kDLCUDA)");
}

// What a DLPack tensor handed out holds: coil's reference, and the arrays it points at.
struct Exported {
  DLManagedTensor managed{};
  Tensor tensor;
  std::vector<int64_t> shape, strides;
};

}  // namespace

Tensor from_dlpack(DLManagedTensor* managed, DType expected) {
  COIL_CHECK(managed != nullptr, "DLPack: a null tensor");
  auto release = [managed] {
    if (managed->deleter) managed->deleter(managed);
  };
  try {
    const DLTensor& t = managed->dl_tensor;
    COIL_CHECK(t.ndim >= 0 && t.ndim <= 64, "DLPack: a tensor of ", t.ndim, " dims");
    TensorMeta m;
    m.dtype = dtype_of(t.dtype, expected);
    m.device = device_of(t.device);
    m.sizes.assign(t.shape, t.shape + t.ndim);
    m.strides = t.strides ? Shape(t.strides, t.strides + t.ndim) : contiguous_strides(m.sizes);
    COIL_CHECK(t.byte_offset % itemsize(m.dtype) == 0, "DLPack: a byte offset of ", t.byte_offset,
               " is not a whole number of ", dtype_name(m.dtype), " elements");
    int64_t extent = 1;  // elements from the first to one past the last
    for (int64_t d = 0; d < t.ndim; ++d) {
      COIL_CHECK(m.sizes[d] >= 0 && m.strides[d] >= 0, "DLPack: a tensor of sizes ",
                 shape_str(m.sizes), " and strides ", shape_str(m.strides),
                 " (negative ones are not supported)");
      if (m.sizes[d] == 0) extent = 0;
      if (extent) extent += (m.sizes[d] - 1) * m.strides[d];
    }
    auto storage = std::make_shared<Storage>();
    storage->data = static_cast<char*>(t.data) + t.byte_offset;
    storage->nbytes = static_cast<size_t>(extent) * itemsize(m.dtype);
    storage->device = m.device;
    storage->deleter = [managed](void*) {
      if (managed->deleter) managed->deleter(managed);
    };
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = std::move(storage);
    impl->meta = std::move(m);
    return Tensor(std::move(impl));
  } catch (...) {
    release();
    throw;
  }
}

DLManagedTensor* to_dlpack(const Tensor& t) {
  auto out = std::make_unique<Exported>();
  out->tensor = t;
  out->shape = t.sizes();
  out->strides = t.strides();
  DLTensor& d = out->managed.dl_tensor;
  d.data = t.impl()->data();
  d.device = t.device().is_cuda() ? DLDevice{kDLCUDA, t.device().index} : DLDevice{kDLCPU, 0};
  d.ndim = static_cast<int32_t>(t.dim());
  d.dtype = dlpack_dtype(t.dtype());
  d.shape = out->shape.data();
  d.strides = out->strides.data();
  d.byte_offset = 0;
  out->managed.manager_ctx = out.get();
  out->managed.deleter = [](DLManagedTensor* self) {
    delete static_cast<Exported*>(self->manager_ctx);
  };
  return &out.release()->managed;
}

}  // namespace coil::capi
