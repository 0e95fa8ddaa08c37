#include "jit/code_cache.h"

#include <chrono>
#include <future>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <vector>

#include <coil/error.h>

#include "debug/log.h"
#include "jit/cache_key.h"
#include "jit/disk_cache.h"

namespace coil::jit {

namespace {

using ModulePtr = std::shared_ptr<const Module>;
// One per key being loaded or loaded: the first caller fulfils it, later callers wait on it.
using Slot = std::shared_ptr<std::shared_future<ModulePtr>>;

constexpr int kErrorLines = 40;  // of compiler output in an error message

struct State {
  std::mutex mutex;
  std::unordered_map<std::string, Slot> loaded;
  JitStats stats;
};
// Never destroyed: modules stay loaded until exit, so code running in other static
// destructors may still call into them.
State& state() {
  static State* s = new State;
  return *s;
}

// Removes `slot` from the memory cache unless clear_memory_cache() already replaced it.
void forget(const std::string& key, const Slot& slot) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (auto it = s.loaded.find(key); it != s.loaded.end() && it->second == slot) s.loaded.erase(it);
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

std::string first_lines(const std::string& text, int count) {
  std::istringstream in(text);
  std::string line, out;
  for (int i = 0; i < count && std::getline(in, line); ++i) out += line + "\n";
  if (std::getline(in, line)) out += "...\n";
  return out;
}

void compile(const Compiler& compiler, const CacheEntry& entry, const std::string& source,
             const std::string& name, LoadInfo& info) {
  std::string src = entry.path(compiler.source_extension());
  write_file_atomically(src, source);
  TempFile output(entry.dir, entry.key, compiler.binary_extension());
  info.compile_start = std::chrono::steady_clock::now();
  Compiler::Outcome result = compiler.compile(source, src, output.path());
  info.compile_ms = ms_since(info.compile_start);
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    ++s.stats.compiles;
    s.stats.compile_ms += info.compile_ms;
  }
  if (!result.ok) {
    std::string log = entry.path(".log");
    write_file_atomically(log, result.log);
    throw Error(detail::str_cat("jit: compiling '", name, "' failed: ", compiler.name(), " ",
                                result.failure, ".\n  source: ", src, "\n  full output: ", log,
                                "\n", first_lines(result.log, kErrorLines)));
  }
  output.commit(entry.path(compiler.binary_extension()));
}

ModulePtr load_from_disk_or_compile(const std::string& source, const std::string& name,
                                    const Compiler& compiler, LoadInfo& info) {
  CacheEntry entry = open_cache_entry(info.key);
  std::string binary = entry.path(compiler.binary_extension());
  if (file_exists(binary)) {
    info.outcome = CacheOutcome::disk_hit;
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    ++s.stats.disk_hits;
  } else {
    info.outcome = CacheOutcome::compiled;
    compile(compiler, entry, source, name, info);
  }
  info.load_start = std::chrono::steady_clock::now();
  ModulePtr module = compiler.load(binary);
  info.load_ms = ms_since(info.load_start);
  return module;
}

void log_load(const std::string& name, const LoadInfo& info, const ModulePtr& module) {
  if (!debug::log_enabled("cache")) return;
  std::ostringstream line;
  line.precision(3);
  line << to_string(info.outcome) << " " << name << " key=" << info.key;
  if (info.outcome == CacheOutcome::compiled) line << " compile " << info.compile_ms << " ms";
  line << " total " << info.total_ms << " ms " << module->path();
  debug::log("cache", "jit", line.str());
}

}  // namespace

const char* to_string(CacheOutcome outcome) {
  switch (outcome) {
    case CacheOutcome::memory_hit:
      return "memory hit";
    case CacheOutcome::disk_hit:
      return "disk hit";
    case CacheOutcome::compiled:
      return "miss";
  }
  return "?";
}

ModulePtr load(const std::string& source, const Compiler& compiler, const std::string& name_hint,
               LoadInfo* info_out) {
  auto start = std::chrono::steady_clock::now();
  LoadInfo info;
  info.key = cache_key(source, compiler.key_fields());
  info.loader = compiler.loader();

  State& s = state();
  Slot slot;
  std::promise<ModulePtr> promise;
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    Slot& entry = s.loaded[info.key];
    if (entry) {
      ++s.stats.memory_hits;
    } else {
      entry = std::make_shared<std::shared_future<ModulePtr>>(promise.get_future().share());
      first = true;
    }
    slot = entry;
  }
  if (first) {
    try {
      promise.set_value(load_from_disk_or_compile(source, name_hint, compiler, info));
    } catch (...) {
      promise.set_exception(std::current_exception());  // threads waiting on it get it too
      forget(info.key, slot);  // so a later load retries (the disk may have been full)
      throw;
    }
  }
  ModulePtr module = slot->get();  // waits for another thread's compile; rethrows its error
  info.total_ms = ms_since(start);
  log_load(name_hint, info, module);
  if (info_out) *info_out = info;
  return module;
}

JitStats stats() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.stats;
}

void reset_stats() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.stats = JitStats{};
}

void clear_memory_cache() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.loaded.clear();
}

}  // namespace coil::jit
