#include "runtime/caching_allocator.h"

#include <cstdio>

#include <coil/error.h>

namespace coil {

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

size_t CachingAllocator::round_size(size_t bytes) {
  if (bytes < kMinBlock) return kMinBlock;
  return (bytes + kMinBlock - 1) / kMinBlock * kMinBlock;
}

size_t CachingAllocator::segment_size(size_t rounded) {
  if (rounded <= kSmallSize) return kSmallSegment;
  if (rounded < kMinLargeAlloc) return kLargeSegment;
  return (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

bool CachingAllocator::ByStreamSize::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->size != b->size) return a->size < b->size;
  return a->ptr < b->ptr;
}

CachingAllocator::CachingAllocator(std::unique_ptr<DeviceMemory> memory, std::string device)
    : memory_(std::move(memory)), device_(std::move(device)) {}

CachingAllocator::~CachingAllocator() {
  // At exit the device may already be gone (the driver tears down first): only the host
  // bookkeeping is freed here; the process's end returns the memory.
  for (Pool* pool : {&small_, &large_})
    for (Block* b : *pool) delete b;
  for (auto& [ptr, b] : live_) delete b;
}

// The smallest cached block of `stream` that holds `size`.
CachingAllocator::Block* CachingAllocator::find_free(Pool& pool, size_t size, void* stream) {
  Block key{nullptr, size, 0, stream, false};
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* b = *it;
  pool.erase(it);
  return b;
}

CachingAllocator::Block* CachingAllocator::new_segment(size_t size, void* stream, bool small) {
  const size_t bytes = segment_size(size);
  void* ptr = memory_->allocate(bytes);
  if (!ptr) {  // give back what the cache holds, then once more
    ++stats_.retries;
    release_cached();
    ptr = memory_->allocate(bytes);
  }
  if (!ptr) {
    ++stats_.ooms;
    throw Error(format_oom(size, bytes));
  }
  ++stats_.device_allocations;
  stats_.reserved += static_cast<int64_t>(bytes);
  stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
  return new Block{ptr, bytes, 0, stream, small};
}

// Keeps the first `size` bytes of `b` and returns the rest, a free block, when it is worth
// keeping apart: any remainder of a small block, more than 1 MiB of a large one.
CachingAllocator::Block* CachingAllocator::split(Block* b, size_t size) {
  const size_t rest = b->size - size;
  if (b->small ? rest < kMinBlock : rest <= kSmallSize) return nullptr;
  auto* r = new Block{static_cast<char*>(b->ptr) + size, rest, 0, b->stream, b->small};
  r->prev = b;
  r->next = b->next;
  if (b->next) b->next->prev = r;
  b->next = r;
  b->size = size;
  return r;
}

void* CachingAllocator::allocate(size_t bytes, void* stream) {
  if (bytes == 0) return nullptr;
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  process_events();
  const size_t size = round_size(bytes);
  const bool small = size <= kSmallSize;
  Pool& pool = small ? small_ : large_;
  Block* b = find_free(pool, size, stream);
  if (!b) b = new_segment(size, stream, small);
  if (Block* rest = split(b, size)) pool.insert(rest);
  b->allocated = true;
  b->requested = bytes;
  live_[b->ptr] = b;
  ++stats_.allocations;
  stats_.allocated += static_cast<int64_t>(b->size);
  stats_.requested += static_cast<int64_t>(bytes);
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  return b->ptr;
}

void CachingAllocator::record_stream(void* ptr, void* stream) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  auto it = live_.find(ptr);
  COIL_ASSERT(it != live_.end(), "record_stream: ", ptr, " is not a live block of ", device_);
  if (stream != it->second->stream) it->second->other_streams.insert(stream);
}

void CachingAllocator::free(void* ptr) {
  if (!ptr) return;
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  auto it = live_.find(ptr);
  COIL_ASSERT(it != live_.end(), "free: ", ptr, " is not a live block of ", device_);
  Block* b = it->second;
  live_.erase(it);
  b->allocated = false;
  stats_.allocated -= static_cast<int64_t>(b->size);
  stats_.requested -= static_cast<int64_t>(b->requested);
  if (b->other_streams.empty()) {
    free_block(b);
    return;
  }
  // Reused only once the other streams' work queued so far is done.
  for (void* s : b->other_streams) {
    events_.push_back({memory_->record_event(s), b});
    ++b->pending_events;
  }
  b->other_streams.clear();
}

// Back into its pool, merged with free neighbours of the same segment.
void CachingAllocator::free_block(Block* b) {
  Pool& pool = b->small ? small_ : large_;
  auto mergeable = [](Block* n) { return n && !n->allocated && n->pending_events == 0; };
  if (mergeable(b->prev)) {
    Block* p = b->prev;
    pool.erase(p);
    p->size += b->size;
    p->next = b->next;
    if (b->next) b->next->prev = p;
    delete b;
    b = p;
  }
  if (mergeable(b->next)) {
    Block* n = b->next;
    pool.erase(n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    delete n;
  }
  pool.insert(b);
}

void CachingAllocator::process_events() {
  for (size_t i = 0; i < events_.size();) {
    auto [event, b] = events_[i];
    if (!memory_->event_done(event)) {
      ++i;
      continue;
    }
    memory_->destroy_event(event);
    events_[i] = events_.back();
    events_.pop_back();
    if (--b->pending_events == 0) free_block(b);
  }
}

// Every cached block that is a whole segment goes back to the device.
void CachingAllocator::release_cached() {
  memory_->synchronize();
  process_events();
  for (Pool* pool : {&small_, &large_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* b = *it;
      if (b->prev || b->next || private_pools_.count(b->stream)) {
        ++it;
        continue;
      }
      memory_->release(b->ptr);
      ++stats_.device_frees;
      stats_.reserved -= static_cast<int64_t>(b->size);
      it = pool->erase(it);
      delete b;
    }
  }
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  release_cached();
}

void CachingAllocator::add_private_pool(void* pool) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  private_pools_.insert(pool);
}

void CachingAllocator::release_private_pool(void* pool, void* stream) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  private_pools_.erase(pool);
  for (auto& [ptr, b] : live_)
    if (b->stream == pool) b->stream = stream;
  for (Pool* p : {&small_, &large_}) {
    std::vector<Block*> moved;
    for (auto it = p->begin(); it != p->end();)
      if ((*it)->stream == pool) {
        moved.push_back(*it);
        it = p->erase(it);
      } else {
        ++it;
      }
    for (Block* b : moved) {
      b->stream = stream;
      p->insert(b);
    }
  }
}

bool CachingAllocator::owned_by(void* ptr, void* pool) const {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  auto it = live_.find(ptr);
  return it != live_.end() && it->second->stream == pool;
}

DeviceMemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  stats_.peak_allocated = stats_.allocated;
  stats_.peak_reserved = stats_.reserved;
}

std::string CachingAllocator::format_oom(size_t requested, size_t segment) {
  return "out of memory on " + device_ + ": tried to allocate " +
         format_bytes(static_cast<int64_t>(requested)) + " (a new segment of " +
         format_bytes(static_cast<int64_t>(segment)) + "); " + memory_->capacity() +
         ". Of coil's memory, " + format_bytes(stats_.allocated) + " is allocated by tensors and " +
         format_bytes(stats_.reserved - stats_.allocated) +
         " is cached but free (in pieces too small for this request). Free tensors you no longer "
         "need, call coil::cuda::empty_cache(), or use smaller batches";
}

}  // namespace coil
