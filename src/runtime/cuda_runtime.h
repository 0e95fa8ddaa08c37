// What coil's runtime and its CUDA backend need of the GPU: devices, coil's stream on each,
// memory (through the caching allocator, runtime/caching_allocator.h) and copies. Implemented
// over the CUDA runtime in runtime/cuda/ when coil is built with a CUDA toolkit; without one,
// runtime/no_cuda.cpp says so in a coil::Error ("coil was built without CUDA").
//
// Every kernel, library call and copy coil makes on a device goes to the thread's current
// stream of that device (coil's own unless a StreamGuard chose another), so work is ordered
// without synchronising; the host waits only where it reads device memory
// (copies to the host, item(), printing) or asks to (coil::cuda::synchronize).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <coil/device.h>

namespace coil::cuda {

// The head sizes (query/key and value features) up to which the CUDA backend computes
// scaled_dot_product_attention without a mask (or with a causal one) in one kernel: the
// decomposition leaves those calls to it.
constexpr int64_t kFusedAttentionMaxHead = 128;
// The head sizes of its backward's kernels (self-attention, float32).
constexpr int64_t kAttentionBackwardMaxHead = 64;

// Built with CUDA, with a driver and at least one device.
bool available();
int device_count();
// coil::Error unless `device` is a CUDA device that exists ("what" names the caller).
void check_device(const Device& device, const char* what);
// Makes `device` current on this thread (its context is created on first use).
void set_device(int device);
// The calling thread's current stream of `device` (a cudaStream_t): coil's own unless a
// StreamGuard set another; every kernel, library call and copy goes there.
void* stream(int device);
// coil's own stream of `device`.
void* default_stream(int device);
// Makes `stream` the calling thread's current stream of `device` (coil's own: the default).
void set_current_stream(int device, void* stream);
// Waits for the current stream of `device`.
void synchronize(int device);

// Device memory from the caching allocator, for work on the current stream (the cache keeps
// freed blocks per stream).
void* allocate(size_t nbytes, int device);
void free(void* ptr, int device);
// The block at `ptr` (an allocation's start) is used by work on `stream` too: once freed, it
// returns to the cache when that stream's work queued until then is done.
void record_stream(void* ptr, void* stream, int device);

// Copies `nbytes` between any two devices (host included). The host waits when the
// destination is host memory; otherwise the copy is queued on the device's stream.
void copy(void* dst, const Device& dst_device, const void* src, const Device& src_device,
          size_t nbytes);
// Page-locked host memory (cudaHostAlloc), and its release, which first waits for coil's
// streams (a copy from it may still be reading).
void* allocate_pinned(size_t nbytes);
void free_pinned(void* ptr);
// A copy from pinned host memory to `device`, queued on its stream without waiting.
void copy_from_pinned(void* dst, int device, const void* src, size_t nbytes);
// A copy from `device` into pinned host memory, queued on its stream without waiting.
void copy_to_pinned(void* dst, const void* src, int device, size_t nbytes);
// Sets `nbytes` of device memory to zero, queued on the device's stream.
void zero(void* ptr, size_t nbytes, int device);

// An error record a kernel just queued may set (device memory from allocate(): i64[2], 0 when
// nothing failed), read without the host waiting: it is copied to pinned memory behind the
// kernel and freed, and the first record found set once its copy is done is raised as a
// coil::Error, message(record[0], record[1]), by the next wait for the device's work
// (synchronize, a copy to the host, item()) or the next such record. With COIL_CUDA_SYNC=1, or
// while a CUDA graph is being recorded, the host waits for it here instead.
void defer_error_record(int device, void* record,
                        std::function<std::string(int64_t, int64_t)> message);
// COIL_CUDA_SYNC=1: the host waits for each launch and checks it (as CUDA_LAUNCH_BLOCKING=1).
bool sync_each_launch();
// Raises the first record found set among those whose copies are done (each waiting call
// above calls it after its wait).
void raise_error_records(int device);

// CUDA graphs (mode="reduce-overhead"). A graph pool is a private pool of the device's caching
// allocator, keyed by any address the caller owns: the memory of the graphs recorded into it is
// never handed to other work while the pool lives (runtime/caching_allocator.h).
void add_graph_pool(void* pool, int device);
// The pool's memory goes back to the device's cache (its graphs are destroyed).
void release_graph_pool(void* pool, int device);
// `ptr` is memory that `pool` gave out (a recorded graph's output).
bool in_graph_pool(void* ptr, void* pool, int device);
// From here on, work queued on `device`'s stream is recorded rather than run, and coil's
// allocations on the device come from `pool`.
void begin_capture(int device, void* pool);
// Whether `device`'s stream is being recorded (between begin_capture and end_capture).
bool capturing(int device);
// The same for any device: false for the CPU, which has no stream to record.
inline bool capturing(Device device) { return device.is_cuda() && capturing(device.index); }
// A copy a graph makes before its recorded work: `bytes` from `src` into `dst` (a static input),
// whose source can change from launch to launch.
struct GraphCopy {
  void* dst;
  const void* src;
  size_t bytes;
};
struct RecordedGraph {
  void* graph = nullptr;      // cudaGraph_t
  void* exec = nullptr;       // cudaGraphExec_t
  std::vector<void*> copies;  // the copies' nodes
};
// Ends the capture: the recorded work after `copies`, instantiated, or coil::Error with CUDA's
// reason when the work could not be recorded (it synchronised, or copied to the host). With
// `previous` (a recording of the same work on other memory), its instantiated graph is updated
// to the new one and taken over where CUDA can (cudaGraphExecUpdate), cheaper than a new one.
RecordedGraph end_capture(int device, const std::vector<GraphCopy>& copies = {},
                          RecordedGraph* previous = nullptr);
// The next launches make copy `k` from `c.src` (which must stay on the same device).
void set_graph_copy(const RecordedGraph& g, size_t k, const GraphCopy& c);
void launch_graph(const RecordedGraph& g, int device);
void destroy_graph(RecordedGraph& g);

struct DeviceInfo {
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 0;
  int max_threads_per_multiprocessor = 0;
  size_t shared_memory_per_block_optin = 0;
  double memory_bytes_per_second = 0;  // the peak: memory clock × bus width, both edges
};
const DeviceInfo& device_info(int device);

// Throws coil::Error for a failed CUDA call: CUDA's name and message, and `what` (the op or
// the call that failed).
void check(int status, const char* what);

// A kernel's error shows at a later call on its stream (a copy, a synchronisation, another
// launch). So that the error can name it, every launch notes what it queued (`kind` "kernel"
// with the kernel's name, or "cuBLASLt's matmul"); an error on the stream then says what was
// queued last. With COIL_CUDA_SYNC=1 each launch also waits for the device and checks, as
// CUDA_LAUNCH_BLOCKING=1 does: the error names the very launch, at the cost of all overlap.
void note_launch(int device, const char* kind, std::string_view name = {});
// "; the last work queued on cuda:N was ...", for an error message ("" when nothing was).
std::string last_launch(int device);
// check() for a call that waits on `device`'s stream, naming the last launch on failure.
void check_stream(int status, int device, const char* what);
// The answer of a query of a stream or an event (cudaStreamQuery, cudaEventQuery): false while
// its work is not done (that status cleared), true when it is; otherwise check_stream's error.
bool query_done(int status, int device, const char* what);

}  // namespace coil::cuda
