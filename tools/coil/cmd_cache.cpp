// coil cache: what the code cache holds (stats), pruning it to its limit (prune), emptying it
// (clear), and compiling the GPU kernels coil ships into it (seed: how the build makes the seed
// cache, src/jit/seed_cache.h). The cache is the one compiled programs use: COIL_CACHE_DIR, else
// $XDG_CACHE_HOME/coil, else ~/.cache/coil (src/jit/disk_cache.h, src/jit/cache_prune.h).
#include <coil/error.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "backends/backend.h"
#include "commands.h"
#include "jit/cache_prune.h"
#include "jit/disk_cache.h"

namespace coil::tool {

namespace {

std::string bytes_text(int64_t bytes) {
  char text[64];
  if (bytes >= (int64_t{1} << 20))
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  else
    std::snprintf(text, sizeof text, "%.1f KiB", static_cast<double>(bytes) / 1024);
  return std::to_string(bytes) + " bytes (" + text + ")";
}

void print_usage(const jit::CacheUsage& u) {
  std::cout << "entries:       " << u.entries << " (" << u.code_entries << " compiled code, "
            << u.graph_entries << " compiled graphs)\n"
            << "size:          " << bytes_text(u.bytes) << "\n"
            << "set aside:     " << u.damaged_files << " damaged files\n"
            << "temporary:     " << u.temp_files << " files (compiles in progress or left by"
            << " killed processes)\n";
}

int seed(const std::string& root) {
  const backends::DeviceBackend* cuda = backends::cuda_backend(-1);
  if (!cuda)
    throw Error(
        "coil cache seed: coil was built without CUDA, and only its GPU kernels are "
        "shipped compiled; nothing to do");
  std::vector<std::string> names;
  const int compiled = cuda->precompile_library_kernels(&names);
  std::cout << "cache:         " << root << "\ncompiled:      " << compiled << " kernel modules";
  for (const std::string& name : names) std::cout << (&name == &names[0] ? ": " : ", ") << name;
  std::cout << "\n";
  return 0;
}

int run_cache(const Args& args) {
  const std::string& action = args.file;
  if (action != "stats" && action != "prune" && action != "clear" && action != "seed")
    throw Error("coil cache: unknown action '" + action + "' (stats, prune, clear or seed)");
  const std::string root = jit::cache_root();
  if (action == "seed") return seed(root);
  const int64_t limit =
      args.has("--max-bytes") ? args.count("--max-bytes", 0) : jit::cache_max_bytes();
  std::cout << "cache:         " << root << "\n"
            << "limit:         " << (limit == 0 ? std::string("none") : bytes_text(limit))
            << (args.has("--max-bytes") ? " (--max-bytes)" : " (COIL_CACHE_MAX_BYTES)") << "\n";
  if (action == "stats") {
    print_usage(jit::cache_usage(root));
    return 0;
  }
  if (action == "prune" && limit == 0) {
    std::cout << "no limit: nothing to prune\n";
    return 0;
  }
  // clear: every entry no running process holds, and every temporary file.
  jit::PruneResult r =
      action == "clear" ? jit::prune_cache(root, 0, 0) : jit::prune_cache(root, limit);
  std::cout << "removed:       " << r.removed_entries << " entries, " << bytes_text(r.removed_bytes)
            << "; " << r.removed_temp_files << " temporary files\n";
  if (r.kept_in_use) std::cout << "kept:          " << r.kept_in_use << " entries in use\n";
  print_usage(r.after);
  return 0;
}

}  // namespace

Command cache_command() {
  return {"cache",
          "show, prune or clear the code cache",
          "coil cache stats|prune|clear|seed [--max-bytes N]",
          "stats: the cache's folder, its limit, and what it holds (entries of compiled code\n"
          "and of compiled graphs, bytes, damaged files set aside, temporary files).\n"
          "prune: removes the least recently used entries until the cache is within its limit\n"
          "(COIL_CACHE_MAX_BYTES, 2 GiB unless set, or --max-bytes), and temporary files older\n"
          "than ten minutes. clear: removes every entry and temporary file. Entries that a\n"
          "running program has loaded stay. seed: compiles the GPU kernels coil writes by hand\n"
          "(flash attention, random draws, copies, pooling) for sm_90 or $COIL_CUDA_ARCH into the\n"
          "cache, unless there: the build runs it into coil-kernels/ beside libcoil, the seed\n"
          "cache a first call loads them from instead of compiling (COIL_SEED_DIR names another).",
          {{"--max-bytes", "N", "the limit to prune to, instead of COIL_CACHE_MAX_BYTES"}},
          run_cache,
          "action"};
}

}  // namespace coil::tool
