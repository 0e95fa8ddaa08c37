// Devices, coil's stream on each, copies and errors, over the CUDA runtime API.
#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <vector>

#include <coil/cuda.h>
#include <coil/error.h>

#include "runtime/cuda_runtime.h"

namespace coil::cuda {

namespace {

struct DeviceState {
  std::once_flag ready;
  cudaStream_t stream = nullptr;
  DeviceInfo info;
};

// One per device, made on first use and never destroyed: the driver tears its contexts down at
// exit before static destructors would run.
std::vector<DeviceState>& devices() {
  static auto* states = new std::vector<DeviceState>(static_cast<size_t>(device_count()));
  return *states;
}

DeviceState& state(int device) {
  auto& all = devices();
  COIL_CHECK(device >= 0 && device < static_cast<int>(all.size()), "cuda: device ", device,
             " does not exist (", all.size(), " CUDA device", all.size() == 1 ? "" : "s",
             " found)");
  DeviceState& s = all[static_cast<size_t>(device)];
  std::call_once(s.ready, [&] {
    check(cudaSetDevice(device), "cudaSetDevice");
    check(cudaFree(nullptr), "creating the device's context");
    check(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    cudaDeviceProp p{};
    check(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
    s.info = DeviceInfo{p.name,
                        p.major,
                        p.minor,
                        p.multiProcessorCount,
                        p.maxThreadsPerMultiProcessor,
                        p.sharedMemPerBlockOptin};
  });
  return s;
}

}  // namespace

void check(int status, const char* what) {
  if (status == cudaSuccess) return;
  auto e = static_cast<cudaError_t>(status);
  cudaGetLastError();  // clear a non-sticky error, so the next call is not blamed for it
  throw Error(std::string(what) + ": CUDA error " + cudaGetErrorName(e) + " (" +
              cudaGetErrorString(e) + ")");
}

int device_count() {
  static const int count = [] {
    int n = 0;
    // No driver or no device: CUDA is not available, which is not an error.
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

bool available() { return device_count() > 0; }
bool is_built() { return true; }
bool is_available() { return available(); }

void check_device(const Device& device, const char* what) {
  COIL_CHECK(device.is_cuda(), what, ": expected a CUDA device, got ", device.str());
  COIL_CHECK(available(), what, ": ", device.str(),
             " is not available (no GPU or no GPU driver found); use the CPU, or run where a GPU "
             "is");
  COIL_CHECK(device.index >= 0 && device.index < device_count(), what, ": ", device.str(),
             " does not exist (", device_count(), " CUDA device", device_count() == 1 ? "" : "s",
             " found)");
}

void set_device(int device) {
  state(device);
  check(cudaSetDevice(device), "cudaSetDevice");
}

void* stream(int device) { return state(device).stream; }

void synchronize(int device) { check(cudaStreamSynchronize(state(device).stream), "synchronize"); }

void synchronize() {
  for (int d = 0; d < device_count(); ++d) synchronize(d);
}

const DeviceInfo& device_info(int device) { return state(device).info; }
std::string device_name(int device) { return state(device).info.name; }

void copy(void* dst, const Device& dst_device, const void* src, const Device& src_device,
          size_t nbytes) {
  if (nbytes == 0) return;
  const int d = dst_device.is_cuda() ? dst_device.index : src_device.index;
  cudaStream_t s = state(d).stream;
  set_device(d);
  cudaMemcpyKind kind = dst_device.is_cuda() ? (src_device.is_cuda() ? cudaMemcpyDeviceToDevice
                                                                     : cudaMemcpyHostToDevice)
                                             : cudaMemcpyDeviceToHost;
  if (kind == cudaMemcpyHostToDevice) {
    // The host memory may be reused as soon as this returns: wait for the copy (pinned staging
    // buffers would let it run on; pageable memory is staged by the driver anyway).
    check(cudaMemcpyAsync(dst, src, nbytes, kind, s), "copy to the GPU");
    check(cudaStreamSynchronize(s), "copy to the GPU");
    return;
  }
  check(cudaMemcpyAsync(dst, src, nbytes, kind, s), "copy");
  if (kind == cudaMemcpyDeviceToHost) check(cudaStreamSynchronize(s), "copy to the host");
}

void zero(void* ptr, size_t nbytes, int device) {
  if (nbytes == 0) return;
  set_device(device);
  check(cudaMemsetAsync(ptr, 0, nbytes, state(device).stream), "zero");
}

}  // namespace coil::cuda
