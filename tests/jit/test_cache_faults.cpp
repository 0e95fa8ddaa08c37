// Faults of the code cache that must never fail a program (docs/reliability.md): damaged
// libraries (cut short, other bytes, no seal, a seal over bytes that do not load) are set aside
// and compiled again with one warning; an unusable cache folder becomes a private temporary
// one; libraries unload when their last user goes; pruning keeps the cache under its limit,
// oldest first, and leaves alone what a process has loaded.

#include <filesystem>
#include <fstream>
#include <random>

#include "jit/cache_prune.h"
#include "jit/disk_cache.h"
#include "jit_testing.h"

using namespace coil;
using coil::testing::JitTest;

namespace {

namespace fs = std::filesystem;

std::string add(int n) {
  return "extern \"C\" int add(int x) { return x + " + std::to_string(n) + "; }\n";
}

int call_add(int n) { return cpu::load_cpp(add(n), "add")->function<int(int)>("add")(1); }

void overwrite(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string file_bytes(const std::string& path) { return *jit::read_file(path); }

}  // namespace

TEST_F(JitTest, DamagedLibrariesAreSetAsideAndCompiledAgain) {
  jit::LoadInfo info;
  std::string library = cpu::load_cpp(add(1), "add", &info)->path();
  const std::string good = file_bytes(library);
  std::mt19937 rng(7);
  std::string noise(good.size(), '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  struct Damage {
    const char* what;
    std::string bytes;
    const char* why;
  };
  const Damage damages[] = {
      {"cut short", good.substr(0, good.size() / 2), "it has no seal"},
      {"random bytes", noise, "it has no seal"},
      {"empty", "", "it has no seal"},
      {"a byte changed", good.substr(0, 100) + char(good[100] ^ 1) + good.substr(101),
       "its checksum does not match"},
      {"sealed bytes that do not load",
       [] {
         // A seal over what is not a library: only loading it can tell.
         std::string path = ::testing::TempDir() + "not_a_library";
         jit::write_file_atomically(path, "not an ELF file", /*sealed=*/true);
         return file_bytes(path);
       }(),
       "it does not load"}};
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.what);
    overwrite(library, d.bytes);
    jit::clear_memory_cache();
    jit::reset_stats();
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(call_add(1), 2);
    std::string warning = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(jit::stats().compiles, 1);
    EXPECT_TRUE(fs::exists(library + ".damaged"));
    EXPECT_NE(file_bytes(library + ".damaged").size(), good.size() + 1);  // the damaged one
    // One warning per file and process, naming the file and why.
    if (&d == &damages[0]) {
      EXPECT_NE(
          warning.find("coil: warning: the cache file '" + library + "' is damaged: " + d.why),
          std::string::npos)
          << warning;
    } else {
      EXPECT_EQ(warning, "");
    }
    jit::clear_memory_cache();
    jit::reset_stats();
    EXPECT_EQ(call_add(1), 2);
    EXPECT_EQ(jit::stats().disk_hits, 1);  // the entry compiled again is good
  }
}

TEST_F(JitTest, StrayTemporaryFilesAreNotEntries) {
  // A process killed mid-compile leaves <key>.tmp.XXXXXX.so: never loaded, pruned when old.
  jit::LoadInfo info;
  std::string library = cpu::load_cpp(add(2), "add", &info)->path();
  fs::remove(library);
  std::string stray = fs::path(library).replace_extension("").string() + ".tmp.abcdef.so";
  overwrite(stray, "half a library");
  jit::clear_memory_cache();
  jit::reset_stats();
  EXPECT_EQ(call_add(2), 3);
  EXPECT_EQ(jit::stats().compiles, 1);
  EXPECT_EQ(jit::cache_usage(cache_dir_).temp_files, 1);
  EXPECT_EQ(jit::prune_cache(cache_dir_, jit::cache_max_bytes()).removed_temp_files, 0);  // new
  EXPECT_EQ(jit::prune_cache(cache_dir_, jit::cache_max_bytes(), 0).removed_temp_files, 1);
  EXPECT_FALSE(fs::exists(stray));
}

TEST_F(JitTest, UnusableCacheFolderFallsBackToATemporaryOne) {
  std::string file = cache_dir_ + "/not_a_directory";
  overwrite(file, "x");
  for (const std::string& bad : {file + "/cache", file}) {
    SCOPED_TRACE(bad);
    setenv("COIL_CACHE_DIR", bad.c_str(), 1);
    jit::clear_memory_cache();
    ::testing::internal::CaptureStderr();
    auto lib = cpu::load_cpp(add(3), "add");
    std::string warning = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(lib->function<int(int)>("add")(1), 4);
    EXPECT_NE(warning.find("coil: warning: cannot use the code cache folder '" + bad + "'"),
              std::string::npos)
        << warning;
    EXPECT_NE(warning.find("COIL_CACHE_DIR"), std::string::npos);
    EXPECT_NE(lib->path().find("/coil-cache-"), std::string::npos) << lib->path();
  }
}

TEST_F(JitTest, LibrariesUnloadWhenTheirLastUserGoes) {
  std::weak_ptr<const jit::Module> weak;
  {
    auto lib = cpu::load_cpp(add(4), "add");
    weak = lib;
    EXPECT_EQ(cpu::load_cpp(add(4), "add"), lib);  // in use: a memory hit
  }
  EXPECT_TRUE(weak.expired());
  jit::reset_stats();
  EXPECT_EQ(call_add(4), 5);
  EXPECT_EQ(jit::stats().disk_hits, 1);
  EXPECT_EQ(jit::stats().compiles, 0);
}

TEST_F(JitTest, PruningRemovesTheLeastRecentlyUsedAndSparesLoadedOnes) {
  std::vector<std::string> paths;
  for (int n = 10; n < 14; ++n) {
    paths.push_back(cpu::load_cpp(add(n), "add")->path());
    // Entries age by their newest file's time: a second apart, oldest first.
    auto t = fs::last_write_time(paths.back()) - std::chrono::seconds(100 - n);
    for (const char* ext : {".so", ".cpp"})
      fs::last_write_time(fs::path(paths.back()).replace_extension(ext), t);
  }
  jit::CacheUsage before = jit::cache_usage(cache_dir_);
  EXPECT_EQ(before.code_entries, 4);
  const int64_t entry_bytes = before.bytes / 4;
  // Under a limit of two and a half entries: the two oldest go.
  jit::PruneResult r = jit::prune_cache(cache_dir_, entry_bytes * 5 / 2);
  EXPECT_EQ(r.removed_entries, 2);
  EXPECT_EQ(r.after.code_entries, 2);
  EXPECT_FALSE(fs::exists(paths[0]));
  EXPECT_FALSE(fs::exists(paths[1]));
  EXPECT_TRUE(fs::exists(paths[2]));
  // A library loaded by this process holds a lease: clearing leaves it, and it still runs.
  auto loaded = cpu::load_cpp(add(13), "add");
  r = jit::prune_cache(cache_dir_, 0);
  EXPECT_EQ(r.removed_entries, 1);
  EXPECT_EQ(r.kept_in_use, 1);
  EXPECT_TRUE(fs::exists(paths[3]));
  EXPECT_EQ(loaded->function<int(int)>("add")(1), 14);
  loaded.reset();
  EXPECT_EQ(jit::prune_cache(cache_dir_, 0).after.entries, 0);
}

TEST_F(JitTest, TheCacheStaysUnderCoilCacheMaxBytes) {
  // With a limit of one byte every new entry measures the cache and prunes it: all that stays is
  // the newest entry, in use while it was measured.
  setenv("COIL_CACHE_MAX_BYTES", "1", 1);
  for (int n = 20; n < 24; ++n) EXPECT_EQ(call_add(n), n + 1);
  unsetenv("COIL_CACHE_MAX_BYTES");
  EXPECT_EQ(jit::cache_usage(cache_dir_).entries, 1);
  EXPECT_EQ(call_add(23), 24);
  // A setting that is not a number warns and keeps the default: it never fails a program.
  setenv("COIL_CACHE_MAX_BYTES", "lots", 1);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(jit::cache_max_bytes(), int64_t{2} << 30);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("COIL_CACHE_MAX_BYTES='lots'"),
            std::string::npos);
  unsetenv("COIL_CACHE_MAX_BYTES");
}
