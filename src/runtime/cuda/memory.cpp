// The caching allocator of each device over cudaMalloc, the memory statistics of
// include/coil/cuda.h, and CUDA graphs: capture into a graph pool, launch.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

#include <coil/cuda.h>
#include <coil/error.h>

#include "runtime/caching_allocator.h"
#include "runtime/cuda_runtime.h"
#include "support/config.h"

namespace coil::cuda {

namespace {

class CudaMemory : public DeviceMemory {
 public:
  explicit CudaMemory(int device) : device_(device) {}
  void* allocate(size_t bytes) override {
    set_device(device_);
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return nullptr;
    }
    check(e, "cudaMalloc");
    return p;
  }
  void release(void* ptr) override {
    set_device(device_);
    check(cudaFree(ptr), "cudaFree");
  }
  void* record_event(void* stream) override {
    set_device(device_);
    cudaEvent_t e;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventRecord(e, static_cast<cudaStream_t>(stream)), "cudaEventRecord");
    return e;
  }
  bool event_done(void* event) override {
    cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (e == cudaErrorNotReady) {
      cudaGetLastError();
      return false;
    }
    check(e, "cudaEventQuery");
    return true;
  }
  void destroy_event(void* event) override { cudaEventDestroy(static_cast<cudaEvent_t>(event)); }
  void synchronize() override {
    set_device(device_);
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  std::string capacity() override {
    size_t free = 0, total = 0;
    set_device(device_);
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) return "the device's capacity is unknown";
    return "GPU " + std::to_string(device_) + " has a total capacity of " +
           format_bytes(static_cast<int64_t>(total)) + " of which " +
           format_bytes(static_cast<int64_t>(free)) + " is free";
  }

 private:
  int device_;
};

// Never destroyed (the driver may be gone by the time static destructors run).
CachingAllocator& allocator(int device) {
  static auto* all = [] {
    auto* v = new std::vector<std::unique_ptr<CachingAllocator>>();
    for (int d = 0; d < device_count(); ++d)
      v->push_back(std::make_unique<CachingAllocator>(std::make_unique<CudaMemory>(d),
                                                      Device(DeviceType::CUDA, d).str()));
    return v;
  }();
  COIL_CHECK(device >= 0 && device < static_cast<int>(all->size()), "cuda: device ", device,
             " does not exist");
  return *(*all)[static_cast<size_t>(device)];
}

}  // namespace

// COIL_CUDA_NO_CACHE=1 gives every tensor memory of its own from cudaMalloc, so that
// compute-sanitizer sees an access past a tensor's end (inside a cached segment it could not).
bool uncached() {
  static const bool on = config::flag(config::Var::CudaNoCache);
  return on;
}

// Per device: the graph pool that allocations go to while its stream is captured (or null).
std::atomic<void*> g_capture_pool[64];

void* allocate(size_t nbytes, int device) {
  if (!uncached()) {
    void* pool = g_capture_pool[device].load(std::memory_order_relaxed);
    return allocator(device).allocate(nbytes, pool ? pool : stream(device));
  }
  set_device(device);
  void* p = nullptr;
  // Rounded to whole 32-bit words: the atomics on 8- and 16-bit elements (scatter_add's) swap
  // the word that holds the element, which the caching allocator's rounding always covers.
  if (nbytes) check(cudaMalloc(&p, (nbytes + 3) & ~size_t{3}), "cudaMalloc");
  return p;
}

void free(void* ptr, int device) {
  if (!uncached()) {
    allocator(device).free(ptr);
    return;
  }
  set_device(device);
  cudaFree(ptr);  // synchronises: the kernels that used it are done
}

void record_stream(void* ptr, void* stream, int device) {
  // (Without the cache, cudaFree waits for every stream before the memory can be reused.)
  if (!uncached() && ptr) allocator(device).record_stream(ptr, stream);
}

void add_graph_pool(void* pool, int device) { allocator(device).add_private_pool(pool); }

void release_graph_pool(void* pool, int device) {
  allocator(device).release_private_pool(pool, stream(device));
}

bool in_graph_pool(void* ptr, void* pool, int device) {
  return !uncached() && allocator(device).owned_by(ptr, pool);
}

void begin_capture(int device, void* pool) {
  COIL_CHECK(!uncached(),
             "CUDA graphs: not with COIL_CUDA_NO_CACHE=1 (every free would "
             "synchronise the device, which a capture cannot)");
  COIL_CHECK(device >= 0 && device < 64, "CUDA graphs: device ", device, " is out of range");
  set_device(device);
  check(cudaStreamBeginCapture(static_cast<cudaStream_t>(stream(device)),
                               cudaStreamCaptureModeRelaxed),
        "cudaStreamBeginCapture");
  g_capture_pool[device] = pool;
}

bool capturing(int device) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaStreamIsCapturing(static_cast<cudaStream_t>(stream(device)), &status);
  return status != cudaStreamCaptureStatusNone;
}

RecordedGraph end_capture(int device, const std::vector<GraphCopy>& copies,
                          RecordedGraph* previous) {
  g_capture_pool[device] = nullptr;
  set_device(device);
  RecordedGraph g;
  cudaGraph_t graph = nullptr;
  check(cudaStreamEndCapture(static_cast<cudaStream_t>(stream(device)), &graph),
        "recording a CUDA graph");
  g.graph = graph;
  try {
    // The copies first: every node the capture made without a dependency waits for them.
    size_t n = 0;
    check(cudaGraphGetRootNodes(graph, nullptr, &n), "cudaGraphGetRootNodes");
    std::vector<cudaGraphNode_t> roots(n), from(n);
    if (n) check(cudaGraphGetRootNodes(graph, roots.data(), &n), "cudaGraphGetRootNodes");
    for (const GraphCopy& c : copies) {
      cudaGraphNode_t node;
      check(cudaGraphAddMemcpyNode1D(&node, graph, nullptr, 0, c.dst, c.src, c.bytes,
                                     cudaMemcpyDeviceToDevice),
            "cudaGraphAddMemcpyNode1D");
      std::fill(from.begin(), from.end(), node);
      if (n)
        check(cudaGraphAddDependencies(graph, from.data(), roots.data(), nullptr, n),
              "cudaGraphAddDependencies");
      g.copies.push_back(node);
    }
    if (previous && previous->exec) {
      cudaGraphExecUpdateResultInfo info{};
      if (cudaGraphExecUpdate(static_cast<cudaGraphExec_t>(previous->exec), graph, &info) ==
          cudaSuccess) {
        // Later updates of its copies name the nodes of the graph it was instantiated from.
        std::swap(g.graph, previous->graph);
        std::swap(g.copies, previous->copies);
        std::swap(g.exec, previous->exec);
        destroy_graph(*previous);
      } else {
        cudaGetLastError();  // not sticky: the graph is instantiated anew below
      }
    }
    if (!g.exec) {
      cudaGraphExec_t exec = nullptr;
      check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
      g.exec = exec;
    }
  } catch (...) {
    destroy_graph(g);
    throw;
  }
  return g;
}

void set_graph_copy(const RecordedGraph& g, size_t k, const GraphCopy& c) {
  check(cudaGraphExecMemcpyNodeSetParams1D(static_cast<cudaGraphExec_t>(g.exec),
                                           static_cast<cudaGraphNode_t>(g.copies[k]), c.dst, c.src,
                                           c.bytes, cudaMemcpyDeviceToDevice),
        "cudaGraphExecMemcpyNodeSetParams1D");
}

void launch_graph(const RecordedGraph& g, int device) {
  note_launch(device, "a CUDA graph");
  check_stream(cudaGraphLaunch(static_cast<cudaGraphExec_t>(g.exec),
                               static_cast<cudaStream_t>(stream(device))),
               device, "cudaGraphLaunch");
}

void destroy_graph(RecordedGraph& g) {
  if (g.exec) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(g.exec));
  if (g.graph) cudaGraphDestroy(static_cast<cudaGraph_t>(g.graph));
  g = RecordedGraph{};
}

int64_t memory_allocated(int device) {
  return available() ? allocator(device).stats().allocated : 0;
}
int64_t max_memory_allocated(int device) {
  return available() ? allocator(device).stats().peak_allocated : 0;
}
int64_t memory_reserved(int device) { return available() ? allocator(device).stats().reserved : 0; }
void reset_peak_memory_stats(int device) {
  if (available()) allocator(device).reset_peak_stats();
}
void empty_cache() {
  for (int d = 0; d < device_count(); ++d) allocator(d).empty_cache();
}

}  // namespace coil::cuda
