// The CUDA runtime of a build without a CUDA toolkit: no device is available, and anything that
// would touch one says why.
#include <coil/cuda.h>
#include <coil/error.h>

#include "runtime/cuda_runtime.h"

namespace coil::cuda {

namespace {
[[noreturn]] void unavailable(const char* what) {
  throw Error(std::string(what) +
              ": coil was built without CUDA (no CUDA toolkit was found when it was configured); "
              "rebuild it where a CUDA toolkit is installed (/usr/local/cuda), or use the CPU");
}
}  // namespace

bool available() { return false; }
int device_count() { return 0; }
void check_device(const Device& device, const char* what) { unavailable(what); }
void set_device(int) { unavailable("cuda"); }
void* stream(int) { unavailable("cuda"); }
void* default_stream(int) { unavailable("cuda"); }
void set_current_stream(int, void*) { unavailable("cuda"); }
void record_stream(void*, void*, int) {}
void synchronize(int) { unavailable("cuda::synchronize"); }
void* allocate(size_t, int) { unavailable("cuda"); }
void free(void*, int) {}
void copy(void*, const Device&, const void*, const Device&, size_t) { unavailable("to"); }
void zero(void*, size_t, int) { unavailable("cuda"); }
void* allocate_pinned(size_t) { unavailable("pin_memory"); }
void free_pinned(void*) {}
void copy_from_pinned(void*, int, const void*, size_t) { unavailable("to"); }
void copy_to_pinned(void*, const void*, int, size_t) { unavailable("to"); }
const DeviceInfo& device_info(int) { unavailable("cuda"); }
void add_graph_pool(void*, int) { unavailable("CUDA graphs"); }
void release_graph_pool(void*, int) {}
bool in_graph_pool(void*, void*, int) { return false; }
void begin_capture(int, void*) { unavailable("CUDA graphs"); }
bool capturing(int) { return false; }
RecordedGraph end_capture(int, const std::vector<GraphCopy>&, RecordedGraph*) {
  unavailable("CUDA graphs");
}
void set_graph_copy(const RecordedGraph&, size_t, const GraphCopy&) { unavailable("CUDA graphs"); }
void launch_graph(const RecordedGraph&, int) { unavailable("CUDA graphs"); }
void destroy_graph(RecordedGraph&) {}
void check(int, const char* what) { unavailable(what); }
void note_launch(int, const char*, std::string_view) { unavailable("cuda"); }
std::string last_launch(int) { return ""; }
void check_stream(int, int, const char* what) { unavailable(what); }

// The public API (include/coil/cuda.h).
bool is_built() { return false; }
std::string device_name(int) { unavailable("coil::cuda::device_name"); }
bool is_available() { return false; }
void synchronize() { unavailable("coil::cuda::synchronize"); }
int64_t memory_allocated(int) { return 0; }
int64_t max_memory_allocated(int) { return 0; }
int64_t memory_reserved(int) { return 0; }
void reset_peak_memory_stats(int) {}
void empty_cache() {}

Event::Event(bool, int) { unavailable("coil::cuda::Event"); }
Event::~Event() = default;
Event::Event(Event&&) noexcept = default;
Event& Event::operator=(Event&&) noexcept = default;
void Event::record() { unavailable("coil::cuda::Event::record"); }
void Event::record(const Stream&) { unavailable("coil::cuda::Event::record"); }
Stream::Stream(int) { unavailable("coil::cuda::Stream"); }
Stream Stream::current(int) { unavailable("coil::cuda::Stream::current"); }
Stream Stream::default_stream(int) { unavailable("coil::cuda::Stream::default_stream"); }
bool Stream::query() const { return true; }
void Stream::synchronize() const {}
void Stream::wait_stream(const Stream&) const { unavailable("coil::cuda::Stream::wait_stream"); }
void Stream::wait_event(const Event&) const { unavailable("coil::cuda::Stream::wait_event"); }
StreamGuard::StreamGuard(const Stream&) { unavailable("coil::cuda::StreamGuard"); }
StreamGuard::~StreamGuard() = default;
void record_stream(const Tensor&, const Stream&) { unavailable("coil::cuda::record_stream"); }
bool Event::query() const { return true; }
void Event::synchronize() const {}
double Event::elapsed_time(const Event&) const { unavailable("coil::cuda::Event::elapsed_time"); }

}  // namespace coil::cuda
