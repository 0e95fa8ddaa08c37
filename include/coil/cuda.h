// The GPU: whether there is one, and coil's use of its memory (as torch.cuda). Tensors move
// there with .to(coil::kCUDA) / .cuda() and back with .cpu(); coil's work on a device is queued
// on the calling thread's current stream of the device (coil's own stream, unless a
// StreamGuard made another current), so the host waits only where it reads results (.cpu(),
// .item(), printing) or calls synchronize().
#pragma once

#include <cstdint>
#include <string>

namespace coil {
class Tensor;
}

namespace coil::cuda {

// coil was built with CUDA (a CUDA toolkit was found when it was configured).
bool is_built();
// coil was built with CUDA, and a driver and a device are present.
bool is_available();
int device_count();
// "NVIDIA H100 80GB HBM3"
std::string device_name(int device = 0);
// Waits for all work on every device, on every stream (as torch.cuda.synchronize).
void synchronize();

// The caching allocator (as torch.cuda.memory_allocated and friends), in bytes: memory held by
// live tensors, the most it held since the start or the last reset, and all the memory coil has
// taken from the device (live and cached).
int64_t memory_allocated(int device = 0);
int64_t max_memory_allocated(int device = 0);
int64_t memory_reserved(int device = 0);
void reset_peak_memory_stats(int device = 0);
// Gives cached, unused memory back to the device (other programs can use it).
void empty_cache();

// TF32, as torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32: float32
// matrix products (cuBLASLt), and convolutions (cuDNN), may run on tensor cores with inputs
// rounded to 10 mantissa bits. PyTorch's defaults: products off (full precision), convolutions
// on. A switch applies from the next product or convolution, eager or compiled; a CUDA graph
// already recorded keeps what it had.
void set_matmul_allow_tf32(bool on);
bool matmul_allow_tf32();
void set_cudnn_allow_tf32(bool on);
bool cudnn_allow_tf32();

class Event;

// A stream of a device (as torch.cuda.Stream): a queue of GPU work, run in order. Work on two
// streams may run at the same time; order it with wait_stream or wait_event, as in PyTorch.
// A Stream is a cheap handle: new ones come in turn from a pool of 32 per device that lives as
// long as the process (as PyTorch's), so memory cached for a stream never meets a new stream at
// the same address.
class Stream {
 public:
  // The next stream of the device's pool (not coil's own).
  explicit Stream(int device = 0);
  // The calling thread's current stream of the device: where coil queues its work there.
  static Stream current(int device = 0);
  // coil's own stream of the device: the current one unless a StreamGuard says otherwise.
  static Stream default_stream(int device = 0);

  int device() const { return device_; }
  void* handle() const { return handle_; }  // cudaStream_t
  // Whether the GPU has done all work queued on the stream.
  bool query() const;
  // Waits for all work queued on the stream.
  void synchronize() const;
  // Work queued on this stream from now on starts after the work queued so far on `other`
  // (the host does not wait).
  void wait_stream(const Stream& other) const;
  // Work queued on this stream from now on starts after `event`'s mark is passed.
  void wait_event(const Event& event) const;
  bool operator==(const Stream& other) const { return handle_ == other.handle_; }

 private:
  Stream(void* handle, int device) : handle_(handle), device_(device) {}
  void* handle_ = nullptr;
  int device_ = 0;
};

// Makes `stream` the calling thread's current stream of its device while the guard lives (as
// `with torch.cuda.stream(s):`); the one before is current again after.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
};

// As Tensor.record_stream: `tensor`'s GPU memory is used by work queued on `stream` too, which
// is not the stream it was allocated on; when the tensor is freed, its memory returns to the
// cache only once that stream's work queued until then is done.
void record_stream(const Tensor& tensor, const Stream& stream);

// A CUDA event of a device (as torch.cuda.Event): a mark in a stream's queue of work, passed
// when the GPU has done everything queued there before it. Timing events measure device time
// between two marks, without the host waiting in between (benchmarks: a call's kernels, not
// its launches). Move-only.
class Event {
 public:
  explicit Event(bool enable_timing = false, int device = 0);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Marks the work queued so far on the current stream of the event's device, or on `stream`.
  void record();
  void record(const Stream& stream);
  // Whether the GPU has passed the mark (true for an event never recorded).
  bool query() const;
  // Waits for the GPU to pass the mark.
  void synchronize() const;
  // Milliseconds from this event's mark to `end`'s, both recorded and passed (call
  // synchronize() on `end` first) and made with enable_timing; otherwise a coil::Error.
  double elapsed_time(const Event& end) const;
  void* handle() const { return event_; }  // cudaEvent_t

 private:
  void* event_ = nullptr;  // cudaEvent_t
  int device_ = 0;
  bool timing_ = false;
  bool recorded_ = false;
};

}  // namespace coil::cuda

namespace coil {

// As torch.set_float32_matmul_precision: "highest" (the default: full precision), "high" or
// "medium" (TF32 for float32 products on the GPU; CPU products stay full precision). Anything
// else is a coil::Error.
void set_float32_matmul_precision(const std::string& precision);
std::string get_float32_matmul_precision();

}  // namespace coil
