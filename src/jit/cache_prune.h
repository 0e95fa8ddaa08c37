// The code cache's size (disk_cache.h): what it holds, and least-recently-used pruning under
// a limit, COIL_CACHE_MAX_BYTES (2 GiB unless set; 0 for no limit). An entry is the files of
// one key (<key>.so, .cpp, .log, .json, .src and any .damaged ones), aged by its newest file
// (hits touch theirs). Pruning never removes an entry whose binary a running process holds a
// Lease on, and removes temporary files that processes killed mid-write left behind.
#pragma once

#include <cstdint>
#include <string>

namespace coil::jit {

struct CacheUsage {
  int64_t bytes = 0;
  int64_t entries = 0;  // of compiled code and of compiled graphs together
  int64_t code_entries = 0;
  int64_t graph_entries = 0;
  int64_t damaged_files = 0;  // set aside (*.damaged)
  int64_t temp_files = 0;     // *.tmp.*: compiles in progress, or left by a killed process
};
CacheUsage cache_usage(const std::string& root);

// COIL_CACHE_MAX_BYTES, else 2 GiB (also, with a warning, when it is not a number of bytes).
int64_t cache_max_bytes();

struct PruneResult {
  int64_t removed_entries = 0;
  int64_t removed_bytes = 0;
  int64_t kept_in_use = 0;  // entries over the limit left because a process holds them
  int64_t removed_temp_files = 0;
  CacheUsage after;
};
// Removes the least recently used entries until the cache holds at most `max_bytes` (with
// `max_bytes` 0: every entry not in use), and temporary files older than `temp_age_s`.
PruneResult prune_cache(const std::string& root, int64_t max_bytes, int64_t temp_age_s = 600);

// Called after each new entry of `bytes`, once it is in use: now and then (on a process's first
// entry, then whenever what it stored since could have filled a sixteenth of the limit)
// measures the cache and prunes it to nine tenths of its limit when it is over.
void note_cache_growth(int64_t bytes);

}  // namespace coil::jit
