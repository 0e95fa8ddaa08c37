// coil::cuda::Event (include/coil/cuda.h): CUDA events on a device's streams.
#include <cuda_runtime_api.h>

#include <utility>

#include <coil/cuda.h>
#include <coil/error.h>

#include "runtime/cuda_runtime.h"

namespace coil::cuda {

Event::Event(bool enable_timing, int device) : device_(device), timing_(enable_timing) {
  check_device(Device(DeviceType::CUDA, device), "cuda::Event");
  set_device(device);
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, enable_timing ? cudaEventDefault : cudaEventDisableTiming),
        "cuda::Event: cudaEventCreate");
  event_ = e;
}

Event::~Event() {
  if (event_) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

Event::Event(Event&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)),
      device_(other.device_),
      timing_(other.timing_),
      recorded_(other.recorded_) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
    event_ = std::exchange(other.event_, nullptr);
    device_ = other.device_;
    timing_ = other.timing_;
    recorded_ = other.recorded_;
  }
  return *this;
}

void Event::record() { record(Stream::current(device_)); }

void Event::record(const Stream& stream) {
  COIL_CHECK(event_, "cuda::Event::record: the event was moved from");
  COIL_CHECK(stream.device() == device_, "cuda::Event::record: the event is of cuda:", device_,
             ", the stream of cuda:", stream.device());
  set_device(device_);
  check_stream(
      cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(stream.handle())),
      device_, "cuda::Event::record");
  recorded_ = true;
}

bool Event::query() const {
  if (!event_ || !recorded_) return true;
  return query_done(cudaEventQuery(static_cast<cudaEvent_t>(event_)), device_,
                    "cuda::Event::query");
}

void Event::synchronize() const {
  if (!event_ || !recorded_) return;
  check_stream(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)), device_,
               "cuda::Event::synchronize");
  raise_error_records(device_);
}

double Event::elapsed_time(const Event& end) const {
  COIL_CHECK(timing_ && end.timing_,
             "cuda::Event::elapsed_time: both events must be made with enable_timing = true");
  COIL_CHECK(recorded_ && end.recorded_,
             "cuda::Event::elapsed_time: both events must be recorded first (record())");
  COIL_CHECK(device_ == end.device_, "cuda::Event::elapsed_time: the events are on cuda:", device_,
             " and cuda:", end.device_, "; time events of one device");
  float ms = 0;
  const cudaError_t status = cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(event_),
                                                  static_cast<cudaEvent_t>(end.event_));
  COIL_CHECK(status != cudaErrorNotReady,
             "cuda::Event::elapsed_time: the GPU has not passed both marks yet; call "
             "synchronize() on the end event first");
  check_stream(status, device_, "cuda::Event::elapsed_time");
  return ms;
}

}  // namespace coil::cuda
