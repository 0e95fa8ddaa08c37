// The caching allocator's bookkeeping on a fake device: rounding, segments, splitting and
// merging, reuse on the same stream only, cross-stream frees that wait for an event, the retry
// after giving cached memory back, and the out-of-memory error.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "runtime/caching_allocator.h"
#include "testing.h"

namespace coil {
namespace {

constexpr size_t MiB = size_t{1} << 20;

// Host memory standing for a device of `capacity` bytes; events finish when the test says so.
struct FakeDevice : DeviceMemory {
  size_t capacity_bytes, used = 0;
  std::map<void*, size_t> segments;
  std::map<void*, bool> events;  // event -> done
  int syncs = 0;
  explicit FakeDevice(size_t capacity) : capacity_bytes(capacity) {}
  void* allocate(size_t bytes) override {
    if (used + bytes > capacity_bytes) return nullptr;
    void* p = std::malloc(bytes);
    segments[p] = bytes;
    used += bytes;
    return p;
  }
  void release(void* p) override {
    used -= segments.at(p);
    segments.erase(p);
    std::free(p);
  }
  void* record_event(void*) override {
    void* e = new int(0);
    events[e] = false;
    return e;
  }
  bool event_done(void* e) override { return events.at(e); }
  void destroy_event(void* e) override {
    events.erase(e);
    delete static_cast<int*>(e);
  }
  void synchronize() override {
    ++syncs;
    for (auto& [e, done] : events) done = true;
  }
  std::string capacity() override {
    return "the fake device holds " + format_bytes(capacity_bytes);
  }
  ~FakeDevice() override {
    for (auto& [p, n] : segments) std::free(p);
    for (auto& [e, d] : events) delete static_cast<int*>(e);
  }
};

struct Fixture {
  FakeDevice* device;
  CachingAllocator allocator;
  explicit Fixture(size_t capacity = 64 * MiB)
      : device(new FakeDevice(capacity)),
        allocator(std::unique_ptr<DeviceMemory>(device), "fake:0") {}
};

void* const kStreamA = reinterpret_cast<void*>(0x10);
void* const kStreamB = reinterpret_cast<void*>(0x20);

TEST(CachingAllocator, RoundsRequestsAndSizesSegments) {
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(600), 1024u);
  EXPECT_EQ(CachingAllocator::round_size(MiB + 1), MiB + 512);
  EXPECT_EQ(CachingAllocator::segment_size(1024), 2 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(3 * MiB), 20 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(11 * MiB), 12 * MiB);
}

TEST(CachingAllocator, SmallBlocksShareASegmentAndMergeBackWhenFreed) {
  Fixture f;
  void* a = f.allocator.allocate(1000, kStreamA);
  void* b = f.allocator.allocate(3000, kStreamA);
  void* c = f.allocator.allocate(100, kStreamA);
  DeviceMemoryStats s = f.allocator.stats();
  EXPECT_EQ(s.device_allocations, 1);
  EXPECT_EQ(s.reserved, static_cast<int64_t>(2 * MiB));
  EXPECT_EQ(s.allocated, 1024 + 3072 + 512);
  EXPECT_EQ(s.requested, 1000 + 3000 + 100);
  EXPECT_EQ(static_cast<char*>(b) - static_cast<char*>(a), 1024);  // split off the same segment
  f.allocator.free(b);  // a hole in the middle, then its neighbours: one block again
  f.allocator.free(a);
  f.allocator.free(c);
  EXPECT_EQ(f.allocator.stats().allocated, 0);
  EXPECT_EQ(f.allocator.allocate(2 * MiB - 4096, kStreamB) != nullptr, true);  // another stream
  EXPECT_EQ(f.allocator.stats().device_allocations, 2);
  void* again = f.allocator.allocate(MiB, kStreamA);  // the merged segment serves it
  EXPECT_EQ(again, a);
  EXPECT_EQ(f.allocator.stats().device_allocations, 2);
}

TEST(CachingAllocator, LargeRequestsReuseCachedSegments) {
  Fixture f;
  void* p = f.allocator.allocate(12 * MiB, kStreamA);
  f.allocator.free(p);
  EXPECT_EQ(f.allocator.allocate(12 * MiB - 100, kStreamA), p);
  EXPECT_EQ(f.allocator.stats().device_allocations, 1);
  EXPECT_EQ(f.allocator.stats().peak_allocated, static_cast<int64_t>(12 * MiB));
}

TEST(CachingAllocator, EmptyCacheReturnsWholeFreeSegmentsOnly) {
  Fixture f;
  void* a = f.allocator.allocate(4096, kStreamA);
  void* b = f.allocator.allocate(3 * MiB, kStreamA);
  f.allocator.free(b);
  f.allocator.empty_cache();  // b's segment goes; a's holds a live block and stays
  EXPECT_EQ(f.allocator.stats().reserved, static_cast<int64_t>(2 * MiB));
  EXPECT_EQ(f.device->segments.size(), 1u);
  f.allocator.free(a);
  f.allocator.empty_cache();
  EXPECT_EQ(f.allocator.stats().reserved, 0);
  EXPECT_TRUE(f.device->segments.empty());
}

TEST(CachingAllocator, BlocksUsedOnAnotherStreamWaitForItsEvent) {
  Fixture f;
  void* p = f.allocator.allocate(4 * MiB, kStreamA);
  f.allocator.record_stream(p, kStreamB);
  f.allocator.free(p);
  ASSERT_EQ(f.device->events.size(), 1u);
  void* q = f.allocator.allocate(4 * MiB, kStreamA);
  EXPECT_NE(q, p);  // stream B may still read p
  f.allocator.free(q);
  f.device->events.begin()->second = true;  // B's work is done
  EXPECT_EQ(f.allocator.allocate(4 * MiB, kStreamA), p);
}

// A recorded CUDA graph's memory: only requests into the same pool reuse it, empty_cache keeps
// it, and once the pool is released it serves the stream (a block still live, when it is freed).
TEST(CachingAllocator, PrivatePoolsKeepTheirMemoryUntilReleased) {
  Fixture f;
  void* pool = reinterpret_cast<void*>(0x30);
  f.allocator.add_private_pool(pool);
  void* kept = f.allocator.allocate(3 * MiB, pool);  // a graph's output, still live
  void* freed = f.allocator.allocate(4096, pool);    // an intermediate, freed during recording
  EXPECT_TRUE(f.allocator.owned_by(kept, pool));
  EXPECT_FALSE(f.allocator.owned_by(kept, kStreamA));
  f.allocator.free(freed);
  void* other = f.allocator.allocate(4096, kStreamA);
  EXPECT_NE(other, freed);
  f.allocator.free(other);
  EXPECT_EQ(f.allocator.allocate(4096, pool), freed);  // the next recording into the pool
  f.allocator.free(freed);
  const int64_t reserved = f.allocator.stats().reserved;
  f.allocator.empty_cache();  // the stream's free segment goes, the pool's stays
  EXPECT_EQ(f.allocator.stats().reserved, reserved - static_cast<int64_t>(2 * MiB));
  f.allocator.release_private_pool(pool, kStreamA);
  EXPECT_EQ(f.allocator.allocate(4096, kStreamA), freed);
  f.allocator.free(kept);
  EXPECT_EQ(f.allocator.allocate(3 * MiB, kStreamA), kept);
}

TEST(CachingAllocator, OutOfMemoryGivesCachedSegmentsBackThenFailsClearly) {
  Fixture f(24 * MiB);
  void* a = f.allocator.allocate(3 * MiB, kStreamA);  // a 20 MiB segment
  f.allocator.free(a);
  void* b = f.allocator.allocate(11 * MiB, kStreamB);  // needs a's cached segment released
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(f.allocator.stats().retries, 1);
  EXPECT_EQ(f.allocator.stats().reserved, static_cast<int64_t>(12 * MiB));
  EXPECT_COIL_ERROR(f.allocator.allocate(16 * MiB, kStreamB), "out of memory on fake:0");
  try {
    f.allocator.allocate(16 * MiB, kStreamB);
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("tried to allocate 16.00 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("12.00 MiB is allocated by tensors"), std::string::npos) << m;
    EXPECT_NE(m.find("the fake device holds 24.00 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("empty_cache"), std::string::npos) << m;
  }
  EXPECT_EQ(f.allocator.stats().ooms, 2);
  f.allocator.free(b);
}

}  // namespace
}  // namespace coil
