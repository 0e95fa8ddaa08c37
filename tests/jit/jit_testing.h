// A fixture for JIT tests: each test gets a fresh, empty COIL_CACHE_DIR (never the user's
// cache) and no seed cache, an empty in-memory cache and zeroed counters; the JIT's environment
// variables are restored afterwards.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/cpp_compiler.h"

namespace coil::testing {

class JitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"COIL_CACHE_DIR", "COIL_CXX", "COIL_CXXFLAGS", "COIL_COMPILE_THREADS",
                             "XDG_CACHE_HOME", "COIL_SEED_DIR"}) {
      const char* value = std::getenv(name);
      saved_env_[name] = value ? std::optional<std::string>(value) : std::nullopt;
    }
    // The space checks that paths reach the compiler unquoted and unsplit.
    std::string pattern = ::testing::TempDir() + "coil jit-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    cache_dir_ = pattern;
    setenv("COIL_CACHE_DIR", cache_dir_.c_str(), 1);
    setenv("COIL_SEED_DIR", "", 1);  // no seed cache (jit/seed_cache.h) unless a test makes one
    jit::clear_memory_cache();
    jit::reset_stats();
  }

  void TearDown() override {
    for (const auto& [name, value] : saved_env_) {
      if (value)
        setenv(name.c_str(), value->c_str(), 1);
      else
        unsetenv(name.c_str());
    }
    jit::clear_memory_cache();
    std::filesystem::remove_all(cache_dir_);
  }

  // Every file under the cache directory, relative to it, sorted.
  std::vector<std::string> cached_files() const {
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::recursive_directory_iterator(cache_dir_))
      if (e.is_regular_file())
        files.push_back(std::filesystem::relative(e.path(), cache_dir_).string());
    std::sort(files.begin(), files.end());
    return files;
  }

  std::string cache_dir_;

 private:
  std::map<std::string, std::optional<std::string>> saved_env_;
};

}  // namespace coil::testing
