// Devices, coil's stream on each and the thread's current one, copies and errors, over the CUDA
// runtime API.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <mutex>
#include <vector>

#include <coil/cuda.h>
#include <coil/error.h>

#include "runtime/cuda_runtime.h"
#include "support/config.h"

namespace coil::cuda {

namespace {

struct DeviceState {
  std::once_flag ready;
  cudaStream_t stream = nullptr;
  DeviceInfo info;
  std::mutex launch_mutex;  // what note_launch saw last:
  const char* last_kind = nullptr;
  std::string last_name;  // (assigned in place: no allocation once long enough)
};

std::string launch_text(const char* kind, const std::string& name) {
  return std::string(kind) + (name.empty() ? "" : " '" + name + "'");
}

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
    int clock_khz = 0, bus_bits = 0;
    check(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device),
          "cudaDeviceGetAttribute");
    check(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device),
          "cudaDeviceGetAttribute");
    s.info.memory_bytes_per_second = 2.0 * clock_khz * 1e3 * bus_bits / 8;
  });
  return s;
}

}  // namespace

bool sync_each_launch() {
  static const bool on = config::flag(config::Var::CudaSync);
  return on;
}

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

namespace {
// The calling thread's current stream per device (StreamGuard); null: coil's own.
thread_local std::vector<void*> current_streams;
}  // namespace

void* default_stream(int device) { return state(device).stream; }

void* stream(int device) {
  const auto d = static_cast<size_t>(device);
  if (d < current_streams.size() && current_streams[d]) return current_streams[d];
  return state(device).stream;
}

void set_current_stream(int device, void* stream) {
  state(device);
  const auto d = static_cast<size_t>(device);
  if (current_streams.size() <= d) current_streams.resize(d + 1, nullptr);
  current_streams[d] = stream == state(device).stream ? nullptr : stream;
}

void note_launch(int device, const char* kind, std::string_view name) {
  DeviceState& s = state(device);
  {
    std::lock_guard<std::mutex> lock(s.launch_mutex);
    s.last_kind = kind;
    s.last_name.assign(name);
  }
  if (sync_each_launch())
    check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream(device))),
          ("running " + launch_text(kind, std::string(name)) + " (COIL_CUDA_SYNC=1)").c_str());
}

std::string last_launch(int device) {
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(s.launch_mutex);
  if (!s.last_kind) return "";
  return "; the last work queued on cuda:" + std::to_string(device) + " was " +
         launch_text(s.last_kind, s.last_name) +
         (sync_each_launch() ? ""
                             : " (a kernel's error shows at a later call: COIL_CUDA_SYNC=1 "
                               "checks each launch as it ends, naming the one that failed)");
}

void check_stream(int status, int device, const char* what) {
  if (status == cudaSuccess) return;
  try {
    check(status, what);
  } catch (const Error& e) {
    throw Error(e.what() + last_launch(device));
  }
}

bool query_done(int status, int device, const char* what) {
  if (status == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  check_stream(status, device, what);
  return true;
}

void synchronize(int device) {
  check_stream(cudaStreamSynchronize(static_cast<cudaStream_t>(stream(device))), device,
               "synchronize");
  raise_error_records(device);
}

void synchronize() {
  for (int d = 0; d < device_count(); ++d) {
    set_device(d);
    check_stream(cudaDeviceSynchronize(), d, "synchronize");
    raise_error_records(d);
  }
}

const DeviceInfo& device_info(int device) { return state(device).info; }
std::string device_name(int device) { return state(device).info.name; }

void copy(void* dst, const Device& dst_device, const void* src, const Device& src_device,
          size_t nbytes) {
  if (nbytes == 0) return;
  const int d = dst_device.is_cuda() ? dst_device.index : src_device.index;
  auto s = static_cast<cudaStream_t>(stream(d));
  set_device(d);
  cudaMemcpyKind kind = dst_device.is_cuda() ? (src_device.is_cuda() ? cudaMemcpyDeviceToDevice
                                                                     : cudaMemcpyHostToDevice)
                                             : cudaMemcpyDeviceToHost;
  if (kind == cudaMemcpyHostToDevice) {
    // The host memory may be reused as soon as this returns: wait for the copy (pinned staging
    // buffers would let it run on; pageable memory is staged by the driver anyway).
    check_stream(cudaMemcpyAsync(dst, src, nbytes, kind, s), d, "copy to the GPU");
    check_stream(cudaStreamSynchronize(s), d, "copy to the GPU");
    raise_error_records(d);
    return;
  }
  check_stream(cudaMemcpyAsync(dst, src, nbytes, kind, s), d, "copy");
  if (kind == cudaMemcpyDeviceToHost) {
    check_stream(cudaStreamSynchronize(s), d, "copy to the host");
    raise_error_records(d);
  }
}

void* allocate_pinned(size_t nbytes) {
  void* p = nullptr;
  COIL_CHECK(available(),
             "pin_memory: no GPU or no GPU driver found; pinned memory is for "
             "copies to a GPU");
  check(cudaHostAlloc(&p, std::max<size_t>(nbytes, 1), cudaHostAllocDefault),
        "pin_memory: cudaHostAlloc");
  return p;
}

void free_pinned(void* ptr) {
  // A copy queued from this memory may still be reading it: the devices finish first.
  for (int d = 0; d < device_count(); ++d) {
    set_device(d);
    cudaDeviceSynchronize();
  }
  cudaFreeHost(ptr);
}

void copy_from_pinned(void* dst, int device, const void* src, size_t nbytes) {
  if (nbytes == 0) return;
  set_device(device);
  check_stream(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice,
                               static_cast<cudaStream_t>(stream(device))),
               device, "copy from pinned memory to the GPU");
  note_launch(device, "a copy from pinned memory");
}

void copy_to_pinned(void* dst, const void* src, int device, size_t nbytes) {
  if (nbytes == 0) return;
  set_device(device);
  check_stream(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost,
                               static_cast<cudaStream_t>(stream(device))),
               device, "copy from the GPU to pinned memory");
  note_launch(device, "a copy to pinned memory");
}

void zero(void* ptr, size_t nbytes, int device) {
  if (nbytes == 0) return;
  set_device(device);
  check(cudaMemsetAsync(ptr, 0, nbytes, static_cast<cudaStream_t>(stream(device))), "zero");
}

}  // namespace coil::cuda
