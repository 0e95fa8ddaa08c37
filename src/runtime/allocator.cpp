#include "runtime/allocator.h"

#include <sys/mman.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <coil/error.h>

namespace coil {

namespace {

// Blocks from this size on are cached; smaller ones are malloc's business (it reuses them well).
constexpr size_t kCacheMin = size_t{1} << 20;
// At most this much memory sits unused in the cache; beyond it, freed blocks go back at once.
constexpr size_t kCacheMax = size_t{2} << 30;
// Blocks from this size on are aligned for, and advised to use, 2 MiB pages.
constexpr size_t kHugePage = size_t{2} << 20;

size_t rounded(size_t nbytes) {
  size_t align = nbytes >= kCacheMin ? size_t{64} << 10 : 64;  // coarser buckets for big blocks
  return (std::max<size_t>(nbytes, 1) + align - 1) / align * align;
}

class BlockCache {
 public:
  ~BlockCache() { release_all(); }
  void* take(size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(size);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    cached_ -= size;
    return p;
  }
  bool give(void* p, size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    if (cached_ + size > kCacheMax) return false;
    free_[size].push_back(p);
    cached_ += size;
    return true;
  }
  void release_all() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [size, blocks] : free_)
      for (void* p : blocks) std::free(p);
    free_.clear();
    cached_ = 0;
  }

 private:
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
};

BlockCache& cache() {
  static BlockCache c;
  return c;
}

}  // namespace

void* allocate_host(size_t nbytes) {
  size_t size = rounded(nbytes);
  if (size >= kCacheMin)
    if (void* p = cache().take(size)) return p;
  bool huge = size >= kHugePage;
  void* p = std::aligned_alloc(huge ? kHugePage : 64,
                               huge ? (size + kHugePage - 1) / kHugePage * kHugePage : size);
  if (!p) throw Error("out of memory: could not allocate " + std::to_string(nbytes) + " bytes");
  if (huge) madvise(p, size, MADV_HUGEPAGE);  // advice only: failure changes nothing
  return p;
}

void free_host(void* p, size_t nbytes) {
  size_t size = rounded(nbytes);
  if (size >= kCacheMin && cache().give(p, size)) return;
  std::free(p);
}

void empty_host_cache() { cache().release_all(); }

}  // namespace coil
