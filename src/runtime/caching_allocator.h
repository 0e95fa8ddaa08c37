// A caching allocator for device memory, as PyTorch's CUDA caching allocator: freed blocks stay
// with the process and serve later requests on the same stream, so a program that allocates the
// same sizes again and again (a training step, a compiled graph) stops asking the driver.
//
// Requests round up to 512 bytes. Those of 1 MiB or less come from 2 MiB segments (the small
// pool), larger ones from 20 MiB segments below 10 MiB and from segments of their own rounded
// to 2 MiB above; a free block larger than the request is split, and neighbours merge again when
// both are free. A block remembers the stream it was allocated on and is reused only there; one
// used on another stream too (record_stream) returns to the cache when that stream's work so far
// is done. When the device is out of memory, the cached segments are given back and the request
// tried again; then it is a coil::Error saying what was asked, what is allocated and cached, and
// what to do.
//
// A private pool (CUDA graphs, mode="reduce-overhead") is a key that requests pass instead of
// a stream: its blocks serve only requests with the same key, so the memory a recorded graph
// reads and writes is never handed to anything else while the graph lives, and empty_cache keeps
// it. Releasing the pool gives its blocks to a stream's cache, live ones when they are freed.
//
// The device itself is behind DeviceMemory (the CUDA runtime's, runtime/cuda/; tests use a fake
// one), so the allocator's bookkeeping is device-neutral code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace coil {

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // A fresh segment, or nullptr when the device has no memory left.
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* ptr) = 0;
  // An event recorded on `stream` now; done once the stream's work so far has finished.
  virtual void* record_event(void* stream) = 0;
  virtual bool event_done(void* event) = 0;
  virtual void destroy_event(void* event) = 0;
  // Waits for every stream of the device.
  virtual void synchronize() = 0;
  // "GPU 0 has a total capacity of 79.11 GiB of which 1.25 GiB is free", for the OOM error.
  virtual std::string capacity() = 0;
};

struct DeviceMemoryStats {
  int64_t allocated = 0, peak_allocated = 0;  // bytes of live blocks (rounded sizes)
  int64_t reserved = 0, peak_reserved = 0;    // bytes of segments held from the device
  int64_t requested = 0;                      // bytes asked for by live blocks, unrounded
  int64_t allocations = 0, device_allocations = 0, device_frees = 0, retries = 0, ooms = 0;
};

class CachingAllocator {
 public:
  static constexpr size_t kMinBlock = 512;
  static constexpr size_t kSmallSize = size_t{1} << 20;     // small pool: up to 1 MiB
  static constexpr size_t kSmallSegment = size_t{2} << 20;  // its segments
  static constexpr size_t kMinLargeAlloc = size_t{10} << 20;
  static constexpr size_t kLargeSegment = size_t{20} << 20;  // for 1-10 MiB requests
  static constexpr size_t kRoundLarge = size_t{2} << 20;

  // `device` names the device in errors ("cuda:0").
  CachingAllocator(std::unique_ptr<DeviceMemory> memory, std::string device);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // `bytes` for work on `stream`; nullptr for 0 bytes. coil::Error when the device is full.
  void* allocate(size_t bytes, void* stream);
  void free(void* ptr);
  // `ptr` is also used by work queued on `stream`: after free() it waits for that work.
  void record_stream(void* ptr, void* stream);
  // Gives every cached segment that holds no live block back to the device.
  void empty_cache();
  DeviceMemoryStats stats() const;
  void reset_peak_stats();
  // Private pools: `pool` is passed to allocate() in place of a stream (see above).
  void add_private_pool(void* pool);
  void release_private_pool(void* pool, void* stream);
  // `ptr` is a live block that `pool` handed out.
  bool owned_by(void* ptr, void* pool) const;

  // The rounded size of a request, and the segment a request starts when nothing cached fits.
  static size_t round_size(size_t bytes);
  static size_t segment_size(size_t rounded);

 private:
  struct Block {
    void* ptr;
    size_t size;
    size_t requested = 0;
    void* stream;
    bool small;
    bool allocated = false;
    int pending_events = 0;
    Block* prev = nullptr;  // neighbours in the same segment
    Block* next = nullptr;
    std::set<void*> other_streams;
  };
  struct ByStreamSize {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, ByStreamSize>;

  Block* find_free(Pool& pool, size_t size, void* stream);
  Block* new_segment(size_t size, void* stream, bool small);
  Block* split(Block* b, size_t size);
  void free_block(Block* b);
  void process_events();
  void release_cached();
  std::string format_oom(size_t requested, size_t segment);

  std::unique_ptr<DeviceMemory> memory_;
  std::string device_;
  mutable std::recursive_mutex mutex_;
  Pool small_, large_;
  std::unordered_map<void*, Block*> live_;
  std::vector<std::pair<void*, Block*>> events_;  // pending cross-stream uses
  DeviceMemoryStats stats_;
  std::set<void*> private_pools_;
};

// Sizes as "20.00 MiB".
std::string format_bytes(int64_t bytes);

}  // namespace coil
