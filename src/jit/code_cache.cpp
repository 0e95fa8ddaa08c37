#include "jit/code_cache.h"

#include <chrono>
#include <filesystem>
#include <future>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <vector>

#include <coil/error.h>

#include "debug/log.h"
#include "jit/cache_key.h"
#include "jit/cache_prune.h"
#include "jit/disk_cache.h"
#include "jit/seed_cache.h"

namespace coil::jit {

namespace {

using ModulePtr = std::shared_ptr<const Module>;

constexpr int kErrorLines = 40;  // of compiler output in an error message

// A key's place in the memory cache: while its first caller loads it, later callers wait on
// `pending`; once loaded, `module` finds it for as long as someone uses it. The cache holds no
// module alive by itself: a module unloads when the last compiled graph using it goes.
struct Slot {
  std::shared_future<ModulePtr> pending;
  std::weak_ptr<const Module> module;
};

struct State {
  std::mutex mutex;
  std::unordered_map<std::string, Slot> loaded;
  size_t sweep_at = 64;  // drop slots of unloaded modules when the map grows past this
  JitStats stats;
};
// Never destroyed: code running in other static destructors may still load.
State& state() {
  static State* s = new State;
  return *s;
}

// A loaded module with the lease on its file: both live as long as any user of the module.
struct Leased {
  Leased(ModulePtr m, const std::string& path) : module(std::move(m)), lease(path) {}
  ModulePtr module;
  Lease lease;
};

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
  output.seal();
  output.commit(entry.path(compiler.binary_extension()));
}

ModulePtr load_binary(const Compiler& compiler, const std::string& binary, LoadInfo& info) {
  info.load_start = std::chrono::steady_clock::now();
  auto leased = std::make_shared<const Leased>(compiler.load(binary), binary);
  info.load_ms = ms_since(info.load_start);
  return ModulePtr(leased, leased->module.get());
}

// A disk hit is a file whose seal holds and that loads; anything else is set aside and built
// again, so that a damaged cache costs a compile, never the program.
ModulePtr load_from_disk_or_compile(const std::string& source, const std::string& name,
                                    const Compiler& compiler, LoadInfo& info) {
  CacheEntry entry = open_cache_entry(info.key);
  std::string binary = entry.path(compiler.binary_extension());
  SealedFile found = read_sealed(binary);
  if (found.state == SealedFile::State::damaged) set_aside(binary, found.why);
  bool from_seed = false;
  if (found.state != SealedFile::State::ok) {
    if (std::optional<std::string> shipped = seeded(info.key, compiler.binary_extension())) {
      write_file_atomically(entry.path(compiler.source_extension()), source);
      write_file_atomically(binary, *shipped, /*sealed=*/true);
      found.state = SealedFile::State::ok;
      from_seed = true;
    }
  }
  if (found.state == SealedFile::State::ok) {
    try {
      ModulePtr module = load_binary(compiler, binary, info);
      touch(binary);
      info.outcome = from_seed ? CacheOutcome::seed_hit : CacheOutcome::disk_hit;
      State& s = state();
      std::lock_guard<std::mutex> lock(s.mutex);
      ++(from_seed ? s.stats.seed_hits : s.stats.disk_hits);
      return module;
    } catch (const Error& e) {
      set_aside(binary, std::string("it does not load: ") + e.what());
    }
  }
  info.outcome = CacheOutcome::compiled;
  compile(compiler, entry, source, name, info);
  ModulePtr module = load_binary(compiler, binary, info);
  std::error_code gone;  // (pruned by another process already: it is counted as 0)
  const auto bytes = std::filesystem::file_size(binary, gone);
  note_cache_growth(static_cast<int64_t>(source.size() + (gone ? 0 : bytes)));
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
    case CacheOutcome::seed_hit:
      return "seed hit";
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
  std::shared_future<ModulePtr> pending;
  ModulePtr module;
  std::promise<ModulePtr> promise;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    Slot& slot = s.loaded[info.key];
    if ((module = slot.module.lock())) {
      ++s.stats.memory_hits;
    } else if (slot.pending.valid()) {
      ++s.stats.memory_hits;
      pending = slot.pending;
    } else {
      slot.pending = promise.get_future().share();
    }
  }
  if (pending.valid()) {
    module = pending.get();  // waits for another thread's load; rethrows its error
  } else if (!module) {
    try {
      module = load_from_disk_or_compile(source, name_hint, compiler, info);
    } catch (...) {
      promise.set_exception(std::current_exception());  // threads waiting on it get it too
      std::lock_guard<std::mutex> lock(s.mutex);
      s.loaded.erase(info.key);  // so that a later load retries (the disk may have been full)
      throw;
    }
    promise.set_value(module);
    std::lock_guard<std::mutex> lock(s.mutex);
    Slot& slot = s.loaded[info.key];
    slot.module = module;
    slot.pending = {};
    if (s.loaded.size() > s.sweep_at) {
      std::erase_if(s.loaded, [](const auto& kv) {
        return !kv.second.pending.valid() && kv.second.module.expired();
      });
      s.sweep_at = 2 * s.loaded.size() + 64;
    }
  }
  info.total_ms = ms_since(start);
  log_load(name_hint, info, module);
  if (info_out) *info_out = info;
  return module;
}

bool precompile(const std::string& source, const Compiler& compiler, const std::string& name_hint) {
  LoadInfo info;
  info.key = cache_key(source, compiler.key_fields());
  CacheEntry entry = open_cache_entry(info.key);
  if (read_sealed(entry.path(compiler.binary_extension())).state == SealedFile::State::ok)
    return false;
  compile(compiler, entry, source, name_hint, info);
  return true;
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
