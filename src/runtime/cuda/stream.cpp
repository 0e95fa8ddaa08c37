// coil::cuda::Stream and StreamGuard (include/coil/cuda.h): the devices' pools of streams and
// the calling thread's current one.
#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <mutex>

#include <coil/cuda.h>
#include <coil/error.h>
#include <coil/tensor.h>

#include "runtime/cuda_runtime.h"
#include "runtime/tensor_impl.h"

namespace coil::cuda {

namespace {

constexpr size_t kPoolSize = 32;

// A device's pool: made on first use, handed out in turn, never destroyed (memory the caching
// allocator keeps for a stream must never be reused on a new stream at the same address while
// the old one's work may still run).
struct StreamPool {
  std::once_flag made;
  std::array<cudaStream_t, kPoolSize> streams{};
  std::atomic<size_t> next{0};
};

void* next_stream(int device) {
  static auto* pools = new std::array<StreamPool, 64>();
  COIL_CHECK(device < static_cast<int>(pools->size()), "cuda::Stream: device ", device,
             " is past the 64 coil supports");
  StreamPool& p = (*pools)[static_cast<size_t>(device)];
  std::call_once(p.made, [&] {
    set_device(device);
    for (cudaStream_t& s : p.streams)
      check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cuda::Stream: cudaStreamCreate");
  });
  return p.streams[p.next.fetch_add(1) % kPoolSize];
}

}  // namespace

Stream::Stream(int device) : device_(device) {
  check_device(Device(DeviceType::CUDA, device), "cuda::Stream");
  handle_ = next_stream(device);
}

Stream Stream::current(int device) {
  check_device(Device(DeviceType::CUDA, device), "cuda::Stream::current");
  return Stream(stream(device), device);
}

Stream Stream::default_stream(int device) {
  check_device(Device(DeviceType::CUDA, device), "cuda::Stream::default_stream");
  return Stream(cuda::default_stream(device), device);
}

bool Stream::query() const {
  return query_done(cudaStreamQuery(static_cast<cudaStream_t>(handle_)), device_,
                    "cuda::Stream::query");
}

void Stream::synchronize() const {
  check_stream(cudaStreamSynchronize(static_cast<cudaStream_t>(handle_)), device_,
               "cuda::Stream::synchronize");
  raise_error_records(device_);
}

void Stream::wait_event(const Event& event) const {
  COIL_CHECK(event.handle(), "cuda::Stream::wait_event: the event was moved from");
  set_device(device_);
  check(cudaStreamWaitEvent(static_cast<cudaStream_t>(handle_),
                            static_cast<cudaEvent_t>(event.handle()), 0),
        "cuda::Stream::wait_event");
}

void Stream::wait_stream(const Stream& other) const {
  if (other == *this) return;
  Event mark(false, other.device());
  mark.record(other);
  wait_event(mark);  // (destroying the event after the wait was queued is allowed)
}

StreamGuard::StreamGuard(const Stream& stream) : previous_(Stream::current(stream.device())) {
  set_current_stream(stream.device(), stream.handle());
}

StreamGuard::~StreamGuard() { set_current_stream(previous_.device(), previous_.handle()); }

void record_stream(const Tensor& tensor, const Stream& stream) {
  COIL_CHECK(tensor.defined() && tensor.has_storage() && tensor.device().is_cuda(),
             "record_stream: expects a tensor on a GPU, got ",
             tensor.defined() ? tensor.device().str() : std::string("an undefined tensor"));
  COIL_CHECK(tensor.device().index == stream.device(), "record_stream: the tensor is on ",
             tensor.device().str(), " but the stream is of cuda:", stream.device());
  const Storage& storage = *tensor.impl()->storage;
  if (storage.deleter)  // (memory coil did not allocate is not its cache's to reuse)
    cuda::record_stream(storage.data, stream.handle(), stream.device());
}

}  // namespace coil::cuda
