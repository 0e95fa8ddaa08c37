// Error records that kernels set on the device (an index out of range), read without the host
// waiting: each is copied behind its kernel into a slot of pinned memory, with an event after
// the copy, and checked once the event has passed — at the host's next wait for the device, or
// when the next record comes. A compiled step whose gathers checked their indices then queues
// its backward and its optimizer step while the GPU still runs its forward, as it would
// without the checks.
#include <cuda_runtime_api.h>

#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include <coil/error.h>

#include "runtime/cuda_runtime.h"

namespace coil::cuda {

namespace {

constexpr size_t kSlotBytes = 2 * sizeof(int64_t);
constexpr size_t kPageSlots = 256;

struct Pending {
  int64_t* host;  // the record's pinned copy
  cudaEvent_t copied;
  std::function<std::string(int64_t, int64_t)> message;
};

struct Records {
  std::mutex mutex;
  std::deque<Pending> pending;  // in the order queued
  std::vector<int64_t*> free_slots;
  std::vector<cudaEvent_t> free_events;
};

Records& records(int device) {
  static auto* all = new std::vector<Records>(static_cast<size_t>(device_count()));
  return all->at(static_cast<size_t>(device));
}

// The records whose copies are done, taken out of `r` (under its lock): the first that is set,
// as its error message.
std::optional<std::string> collect(Records& r) {
  std::optional<std::string> error;
  while (!r.pending.empty()) {
    Pending& p = r.pending.front();
    if (cudaEventQuery(p.copied) == cudaErrorNotReady) {
      cudaGetLastError();
      break;
    }
    if (p.host[0] != 0 && !error) error = p.message(p.host[0], p.host[1]);
    r.free_slots.push_back(p.host);
    r.free_events.push_back(p.copied);
    r.pending.pop_front();
  }
  return error;
}

void raise_if(const std::optional<std::string>& error) {
  if (error)
    throw Error(*error +
                " (checked on the GPU and found at the host's next wait for it; "
                "COIL_CUDA_SYNC=1 raises it at the call that queued the kernel)");
}

}  // namespace

void raise_error_records(int device) {
  if (device < 0 || device >= device_count()) return;
  Records& r = records(device);
  std::optional<std::string> error;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (r.pending.empty()) return;
    error = collect(r);
  }
  raise_if(error);
}

void defer_error_record(int device, void* record,
                        std::function<std::string(int64_t, int64_t)> message) {
  set_device(device);
  auto s = static_cast<cudaStream_t>(stream(device));
  if (sync_each_launch() || capturing(device)) {
    // (A copy to the host ends a graph's recording: the function runs without one, as before.)
    int64_t e[2] = {0, 0};
    copy(e, kCPU, record, Device(DeviceType::CUDA, device), kSlotBytes);
    free(record, device);
    if (e[0] != 0) throw Error(message(e[0], e[1]));
    return;
  }
  Records& r = records(device);
  std::optional<std::string> earlier;  // a record queued before this one, found set
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    earlier = collect(r);
    if (r.free_slots.empty()) {
      auto* page = static_cast<int64_t*>(allocate_pinned(kPageSlots * kSlotBytes));
      for (size_t i = 0; i < kPageSlots; ++i) r.free_slots.push_back(page + 2 * i);
    }
    if (r.free_events.empty()) {
      cudaEvent_t e = nullptr;
      check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "an error record's event");
      r.free_events.push_back(e);
    }
    Pending p{r.free_slots.back(), r.free_events.back(), std::move(message)};
    r.free_slots.pop_back();
    r.free_events.pop_back();
    check(cudaMemcpyAsync(p.host, record, kSlotBytes, cudaMemcpyDeviceToHost, s),
          "copying an error record");
    check(cudaEventRecord(p.copied, s), "an error record's event");
    r.pending.push_back(std::move(p));
  }
  // (Later work on the stream reuses the record after the copy. Without the caching allocator
  // this free waits for the device, so the new record is checked only at the next wait: the
  // error is found at the same place whichever allocator runs.)
  free(record, device);
  raise_if(earlier);
}

}  // namespace coil::cuda
