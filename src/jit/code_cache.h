// The code cache (Inductor's codecache): generated source in, loaded module out, for any
// backend's compiler (compiler.h). Modules are cached by content (cache_key.h): in memory while
// anyone uses them, so a second load in this process costs a hash and a map lookup, and on disk
// (disk_cache.h), so a new process loads instead of compiling. A damaged file on disk is set
// aside and compiled again. A miss on disk looks in the seed cache (seed_cache.h), the compiled
// code coil ships, before it compiles.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "jit/compiler.h"
#include "jit/module.h"

namespace coil::jit {

enum class CacheOutcome { memory_hit, disk_hit, seed_hit, compiled };
const char* to_string(CacheOutcome outcome);

// What one load did, for the compile timeline.
struct LoadInfo {
  CacheOutcome outcome = CacheOutcome::memory_hit;
  std::string key;
  const char* loader = "";  // how the binary was loaded (Compiler::loader)
  double compile_ms = 0;    // time in the compiler (0 unless compiled)
  double load_ms = 0;       // time loading the binary (0 on a memory hit)
  double total_ms = 0;      // the whole load call
  // When the compiler and dlopen started: the compile timeline nests them in the jit span.
  std::chrono::steady_clock::time_point compile_start, load_start;
};

// Compiles `source` with `compiler` (unless cached) and loads it. `name_hint` names the code in
// logs and errors (a kernel's name, say). Safe to call from several threads: loads of one key
// wait for a single compile. Throws coil::Error when the compiler fails (naming the kept source
// file, with the compiler's first lines of output) or the cache directory is unusable.
std::shared_ptr<const Module> load(const std::string& source, const Compiler& compiler,
                                   const std::string& name_hint, LoadInfo* info = nullptr);

// Compiles `source` into the disk cache unless it holds it already, loading nothing (GPU code
// needs no GPU here): how the build makes the seed cache. Returns whether it compiled.
bool precompile(const std::string& source, const Compiler& compiler, const std::string& name_hint);

// Process-wide counts since start or the last reset_stats().
struct JitStats {
  int64_t compiles = 0;  // compiler runs, failed ones included
  int64_t disk_hits = 0;
  int64_t seed_hits = 0;  // of the disk's misses, found in the seed cache
  int64_t memory_hits = 0;
  double compile_ms = 0;  // total time in the compiler
};
JitStats stats();
void reset_stats();

// Forgets every module loaded so far; each unloads when its last user lets go (as it would
// anyway). The next load of the same source is a disk hit. For tests, and for measuring the
// disk cache.
void clear_memory_cache();

}  // namespace coil::jit
