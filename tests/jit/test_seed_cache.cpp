// The seed cache (jit/seed_cache.h): code compiled ahead into a folder of its own, found when a
// program's code cache misses, copied there and loaded without a compile; a damaged seed file is
// passed over.
#include <cstdlib>
#include <fstream>

#include "jit_testing.h"

using namespace coil;
using coil::testing::JitTest;

namespace {

const std::string kAdd2 = "extern \"C\" int add2(int x) { return x + 2; }\n";

// The build's way of making a seed: kAdd2 precompiled into the cache folder `seed`, nothing
// loaded. Whether it compiled.
bool precompile_into(const std::string& seed) {
  setenv("COIL_CACHE_DIR", seed.c_str(), 1);
  return jit::precompile(kAdd2, cpu::CppCompiler(cpu::current_toolchain()), "add2");
}

// A program with an empty cache of its own (`user`) and the seed `seed`.
void use_seed(const std::string& user, const std::string& seed) {
  setenv("COIL_CACHE_DIR", user.c_str(), 1);
  setenv("COIL_SEED_DIR", seed.c_str(), 1);
}

}  // namespace

TEST_F(JitTest, AMissFoundInTheSeedIsLoadedWithoutACompile) {
  const std::string seed = cache_dir_ + "/seed", user = cache_dir_ + "/user";
  EXPECT_TRUE(precompile_into(seed));
  EXPECT_FALSE(precompile_into(seed));  // there already
  EXPECT_EQ(jit::stats().compiles, 1);

  use_seed(user, seed);
  jit::LoadInfo info;
  auto lib = cpu::load_cpp(kAdd2, "add2", &info);
  EXPECT_EQ(info.outcome, jit::CacheOutcome::seed_hit);
  EXPECT_EQ(lib->function<int(int)>("add2")(1), 3);
  EXPECT_EQ(jit::stats().compiles, 1);
  EXPECT_EQ(jit::stats().seed_hits, 1);
  EXPECT_EQ(lib->path().rfind(user, 0), 0u) << lib->path();  // copied into the program's cache

  // Without the seed, the copy is an ordinary disk hit (a later process finds it there).
  setenv("COIL_SEED_DIR", "", 1);
  jit::clear_memory_cache();
  lib.reset();
  auto again = cpu::load_cpp(kAdd2, "add2", &info);
  EXPECT_EQ(info.outcome, jit::CacheOutcome::disk_hit);
  EXPECT_EQ(again->function<int(int)>("add2")(2), 4);
}

TEST_F(JitTest, ADamagedSeedFileIsPassedOver) {
  const std::string seed = cache_dir_ + "/seed";
  ASSERT_TRUE(precompile_into(seed));
  for (const std::string& file : cached_files())
    if (file.size() > 3 && file.substr(file.size() - 3) == ".so")
      std::ofstream(cache_dir_ + "/" + file, std::ios::trunc) << "not a library";

  use_seed(cache_dir_ + "/user", seed);
  jit::LoadInfo info;
  auto lib = cpu::load_cpp(kAdd2, "add2", &info);
  EXPECT_EQ(info.outcome, jit::CacheOutcome::compiled);
  EXPECT_EQ(lib->function<int(int)>("add2")(5), 7);
  EXPECT_EQ(jit::stats().seed_hits, 0);
}
