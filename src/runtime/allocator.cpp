#include "runtime/allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
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
// At most this much memory sits unused in the cache (a quarter of the machine's, at least
// 2 GiB); beyond it, freed blocks go back at once. A training step frees and asks again for
// more than its activations: a compiled optimizer step's new values of every parameter and its
// moments (1.5 GB for GPT-2 small's AdamW), and blocks returned to the system fault every page
// in again at the next step.
size_t cache_max() {
  static const size_t max = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    const size_t quarter = pages > 0 && page > 0 ? static_cast<size_t>(pages) * page / 4 : 0;
    return std::max(quarter, size_t{2} << 30);
  }();
  return max;
}
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
    if (cached_ + size > cache_max()) return false;
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

}  // namespace coil
