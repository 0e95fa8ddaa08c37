#include "jit/cache_prune.h"

#include <sys/file.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <vector>

#include "debug/log.h"
#include "jit/disk_cache.h"
#include "support/config.h"

namespace coil::jit {

namespace {

namespace fs = std::filesystem;

constexpr int64_t kDefaultMaxBytes = int64_t{2} << 30;
// The cache is measured on a process's first store, then each time what it stored since could
// have filled this fraction of the limit: a walk over the cache per 1/16 of it.
constexpr int64_t kChecksPerLimit = 16;

struct Entry {
  std::vector<fs::path> files;
  int64_t bytes = 0;
  fs::file_time_type used = fs::file_time_type::min();  // (its clock's epoch lies ahead)
  bool graph = false;
};

bool is_temp(const std::string& name) { return name.find(".tmp.") != std::string::npos; }

// Every entry under `root` by its directory and key, and the temporary files beside them.
struct Scan {
  std::map<std::string, Entry> entries;
  std::vector<fs::path> temps;
  int64_t damaged = 0;
};

Scan scan(const std::string& root) {
  Scan out;
  std::error_code error;
  for (fs::recursive_directory_iterator it(root, error), end; !error && it != end;
       it.increment(error)) {
    if (!it->is_regular_file(error)) continue;
    const fs::path& path = it->path();
    const std::string name = path.filename().string();
    if (name.starts_with(".")) continue;  // a probe of a writable folder
    if (is_temp(name)) {
      out.temps.push_back(path);
      continue;
    }
    if (name.ends_with(".damaged")) ++out.damaged;
    Entry& e = out.entries[(path.parent_path() / name.substr(0, name.find('.'))).string()];
    e.files.push_back(path);
    e.bytes += static_cast<int64_t>(it->file_size(error));
    e.used = std::max(e.used, it->last_write_time(error));
    e.graph |= path.extension() == ".json";
  }
  return out;
}

CacheUsage usage_of(const Scan& s) {
  CacheUsage u;
  for (const auto& [key, e] : s.entries) {
    u.bytes += e.bytes;
    ++u.entries;
    ++(e.graph ? u.graph_entries : u.code_entries);
  }
  u.damaged_files = s.damaged;
  u.temp_files = static_cast<int64_t>(s.temps.size());
  return u;
}

// Removes an entry's files unless one of them is leased: the exclusive locks taken here fail
// on a file a process holds a shared lock on, and are kept until the files are gone.
bool remove_unless_leased(const Entry& e) {
  std::vector<int> locks;
  bool leased = false;
  for (const fs::path& file : e.files) {
    int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);
      leased = true;
      break;
    }
    locks.push_back(fd);
  }
  if (!leased)
    for (const fs::path& file : e.files) ::unlink(file.c_str());
  for (int fd : locks) ::close(fd);
  return !leased;
}

}  // namespace

CacheUsage cache_usage(const std::string& root) { return usage_of(scan(root)); }

int64_t cache_max_bytes() {
  const std::optional<std::string> set = config::text(config::Var::CacheMaxBytes);
  if (!set) return kDefaultMaxBytes;
  const char* text = set->c_str();
  char* end = nullptr;
  long long value = std::strtoll(text, &end, 10);
  if (*end == '\0' && value >= 0) return value;
  static std::once_flag warned;  // a cache setting never fails the program
  std::call_once(warned, [text] {
    debug::warn(std::string("COIL_CACHE_MAX_BYTES='") + text +
                "' is not a number of bytes; the cache is limited to 2 GiB. Set it to a number "
                "(0: no limit), or unset it");
  });
  return kDefaultMaxBytes;
}

PruneResult prune_cache(const std::string& root, int64_t max_bytes, int64_t temp_age_s) {
  PruneResult out;
  Scan s = scan(root);
  const auto stale = fs::file_time_type::clock::now() - std::chrono::seconds(temp_age_s);
  std::error_code error;
  for (const fs::path& temp : s.temps)
    if (fs::last_write_time(temp, error) < stale && !error && fs::remove(temp, error))
      ++out.removed_temp_files;

  std::vector<const Entry*> by_age;
  int64_t bytes = 0;
  for (const auto& [key, e] : s.entries) {
    by_age.push_back(&e);
    bytes += e.bytes;
  }
  std::sort(by_age.begin(), by_age.end(),
            [](const Entry* a, const Entry* b) { return a->used < b->used; });
  for (const Entry* e : by_age) {
    if (bytes <= max_bytes && max_bytes > 0) break;
    if (remove_unless_leased(*e)) {
      ++out.removed_entries;
      out.removed_bytes += e->bytes;
      bytes -= e->bytes;
    } else {
      ++out.kept_in_use;
    }
  }
  out.after = cache_usage(root);
  return out;
}

void note_cache_growth(int64_t bytes) {
  const int64_t limit = cache_max_bytes();
  if (limit == 0) return;
  static std::mutex mutex;
  static int64_t since_check = -1;  // bytes stored since the last look; -1: none yet
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (since_check >= 0 && (since_check += bytes) < limit / kChecksPerLimit) return;
    since_check = 0;
  }
  const std::string root = cache_root();
  if (cache_usage(root).bytes <= limit) return;
  PruneResult r = prune_cache(root, limit / 10 * 9);
  debug::log("cache", "jit",
             "the cache in " + root + " was over its limit of " + std::to_string(limit) +
                 " bytes (COIL_CACHE_MAX_BYTES): removed " + std::to_string(r.removed_entries) +
                 " least recently used entries, " + std::to_string(r.removed_bytes) + " bytes");
}

}  // namespace coil::jit
