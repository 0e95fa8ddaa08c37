// The JIT's happy paths: compile and call, the memory and disk caches, what goes into the key,
// concurrent loads in threads and in processes, and linking SLEEF.
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

#include "jit/source_parts.h"
#include "jit_testing.h"

using namespace coil;
using coil::testing::JitTest;

namespace {

const std::string kAdd1 = "extern \"C\" int add1(int x) { return x + 1; }\n";

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_F(JitTest, CompilesLoadsAndCalls) {
  jit::LoadInfo info;
  auto lib = cpu::load_cpp(kAdd1, "add1", &info);
  EXPECT_EQ(lib->function<int(int)>("add1")(41), 42);
  EXPECT_EQ(info.outcome, jit::CacheOutcome::compiled);
  EXPECT_GT(info.compile_ms, 0);
  EXPECT_EQ(jit::stats().compiles, 1);

  // <dir>/<first 2 hex>/<key>.so, with the exact source beside it and nothing else left over.
  ASSERT_EQ(info.key.size(), 32u);
  std::string stem = info.key.substr(0, 2) + "/" + info.key;
  EXPECT_EQ(cached_files(), (std::vector<std::string>{stem + ".cpp", stem + ".so"}));
  EXPECT_EQ(lib->path(), cache_dir_ + "/" + stem + ".so");
  EXPECT_EQ(read_file(cache_dir_ + "/" + stem + ".cpp"), kAdd1);
}

TEST_F(JitTest, SecondLoadIsAMemoryHit) {
  auto first = cpu::load_cpp(kAdd1, "add1");
  jit::LoadInfo info;
  auto second = cpu::load_cpp(kAdd1, "add1", &info);
  EXPECT_EQ(first, second);  // the same loaded library, not a second dlopen
  EXPECT_EQ(info.outcome, jit::CacheOutcome::memory_hit);
  EXPECT_EQ(jit::stats().compiles, 1);
  EXPECT_EQ(jit::stats().memory_hits, 1);
  EXPECT_EQ(jit::stats().disk_hits, 0);
}

TEST_F(JitTest, ClearedMemoryCacheLoadsFromDisk) {
  auto first = cpu::load_cpp(kAdd1, "add1");
  auto add1 = first->function<int(int)>("add1");
  jit::clear_memory_cache();
  EXPECT_EQ(add1(1), 2);  // still loaded: `first` holds it

  jit::LoadInfo info;
  auto again = cpu::load_cpp(kAdd1, "add1", &info);
  EXPECT_EQ(info.outcome, jit::CacheOutcome::disk_hit);
  EXPECT_EQ(again->function<int(int)>("add1")(2), 3);
  EXPECT_EQ(jit::stats().compiles, 1);
  EXPECT_EQ(jit::stats().disk_hits, 1);
}

TEST_F(JitTest, DifferentSourceIsANewCompile) {
  jit::LoadInfo a, b;
  cpu::load_cpp(kAdd1, "add1", &a);
  auto lib = cpu::load_cpp("extern \"C\" int add2(int x) { return x + 2; }", "add2", &b);
  EXPECT_NE(a.key, b.key);
  EXPECT_EQ(lib->function<int(int)>("add2")(1), 3);
  EXPECT_EQ(jit::stats().compiles, 2);
}

TEST_F(JitTest, FlagsReachTheCompilerAndTheKey) {
  const std::string source =
      "#ifdef COIL_TEST_FLAG\n"
      "extern \"C\" int flag() { return COIL_TEST_FLAG; }\n"
      "#else\n"
      "extern \"C\" int flag() { return 0; }\n"
      "#endif\n";
  EXPECT_EQ(cpu::load_cpp(source, "flag")->function<int()>("flag")(), 0);
  setenv("COIL_CXXFLAGS", "-DCOIL_TEST_FLAG=7", 1);
  EXPECT_EQ(cpu::load_cpp(source, "flag")->function<int()>("flag")(), 7);
  EXPECT_EQ(jit::stats().compiles, 2);
}

// A large source compiles in parts side by side (the prelude repeated in each), linked into
// one library: eight kernels of about 40 KB (mostly a comment) for three compilers.
TEST_F(JitTest, LargeSourcesCompileInPartsAndLinkAsOne) {
  std::string source = "static inline int twice(int x) { return 2 * x; }\n";
  const std::string padding = "// " + std::string(40 << 10, 'x') + "\n";
  for (int i = 0; i < 8; ++i)
    source += std::string(jit::kPartBoundary) + padding + "extern \"C\" int k" + std::to_string(i) +
              "(int x) { return twice(x) + " + std::to_string(i) + "; }\n";
  setenv("COIL_COMPILE_THREADS", "3", 1);
  cpu::CppCompiler compiler(cpu::current_toolchain());
  const std::string src = cache_dir_ + "/big.cpp", lib_path = cache_dir_ + "/big.so";
  std::ofstream(src) << source;
  jit::Compiler::Outcome out = compiler.compile(source, src, lib_path);
  ASSERT_TRUE(out.ok) << out.failure << "\n" << out.log.substr(0, 2000);
  EXPECT_NE(out.log.find("big.so.part2.cpp"), std::string::npos) << "not compiled in 3 parts";
  EXPECT_EQ(out.log.find("big.so.part3.cpp"), std::string::npos);
  auto lib = compiler.load(lib_path);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(static_cast<const cpu::Library&>(*lib).function<int(int)>("k" + std::to_string(i))(5),
              10 + i);
  EXPECT_EQ(cached_files(), (std::vector<std::string>{"big.cpp", "big.so"}));  // no parts left

  // A compile that throws on its thread (a compiler that cannot start) throws here, after the
  // others are done, rather than ending the process.
  std::vector<int> ran(3, 0);
  EXPECT_THROW(jit::run_parts(3,
                              [&](size_t i) {
                                ran[i] = 1;
                                if (i == 1) throw Error("part 1 failed");
                              }),
               Error);
  EXPECT_EQ(ran, (std::vector<int>{1, 1, 1}));

  // A part that fails fails the compile, its source kept for the log.
  source += std::string(jit::kPartBoundary) + padding + "this is not C++\n";
  std::ofstream(src) << source;
  out = compiler.compile(source, src, lib_path);
  EXPECT_FALSE(out.ok);
  EXPECT_NE(out.log.find("this is not C++"), std::string::npos) << out.log.substr(0, 2000);
}

TEST_F(JitTest, DefaultCacheDirFollowsXdgCacheHome) {
  unsetenv("COIL_CACHE_DIR");
  setenv("XDG_CACHE_HOME", cache_dir_.c_str(), 1);
  auto lib = cpu::load_cpp(kAdd1, "add1");
  EXPECT_EQ(lib->path().rfind(cache_dir_ + "/coil/", 0), 0u) << lib->path();
}

TEST_F(JitTest, ThreadsLoadingOneKeyShareOneCompile) {
  std::vector<std::shared_ptr<const cpu::Library>> libs(4);
  std::vector<std::thread> threads;
  for (auto& lib : libs) threads.emplace_back([&lib] { lib = cpu::load_cpp(kAdd1, "add1"); });
  for (auto& t : threads) t.join();
  for (const auto& lib : libs) EXPECT_EQ(lib, libs[0]);
  EXPECT_EQ(jit::stats().compiles, 1);
  EXPECT_EQ(jit::stats().memory_hits, 3);
}

// Two processes that miss on the same new key compile it at the same moment; both must succeed
// and leave one good entry (and no temporary files) behind.
TEST_F(JitTest, TwoProcessesCompilingOneKeyBothSucceed) {
  const std::string source = "extern \"C\" int race() { return 7; }\n";
  int start[2];
  ASSERT_EQ(pipe(start), 0);
  pid_t children[2];
  for (pid_t& child : children) {
    child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(start[1]);
      char byte;
      ssize_t got = read(start[0], &byte, 1);  // returns 0 once the parent closes its end
      (void)got;
      int code = 1;
      try {
        code = cpu::load_cpp(source, "race")->function<int()>("race")() == 7 ? 0 : 2;
      } catch (...) {
      }
      _exit(code);  // skip the test harness's exit handlers
    }
  }
  close(start[0]);
  close(start[1]);  // releases both children at once
  for (pid_t child : children) {
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }

  jit::LoadInfo info;
  auto lib = cpu::load_cpp(source, "race", &info);
  EXPECT_EQ(info.outcome, jit::CacheOutcome::disk_hit);
  EXPECT_EQ(lib->function<int()>("race")(), 7);
  std::string stem = info.key.substr(0, 2) + "/" + info.key;
  EXPECT_EQ(cached_files(), (std::vector<std::string>{stem + ".cpp", stem + ".so"}));
}

// Generated code declares SLEEF's functions itself; the library must link against libsleef.
TEST_F(JitTest, LinksSleef) {
  const int width = __builtin_cpu_supports("avx512f") ? 16 : 4;
  const std::string w = std::to_string(width);
  const std::string source = "typedef float vec __attribute__((vector_size(" +
                             std::to_string(width * 4) + ")));\n" + "extern \"C\" vec Sleef_expf" +
                             w + "_u10(vec);\n" +
                             "extern \"C\" void vexp(const float* in, float* out) {\n"
                             "  vec x;\n"
                             "  __builtin_memcpy(&x, in, sizeof x);\n"
                             "  vec y = Sleef_expf" +
                             w +
                             "_u10(x);\n"
                             "  __builtin_memcpy(out, &y, sizeof y);\n"
                             "}\n";
  auto lib = cpu::load_cpp(source, "vexp");  // its functions are valid while it is loaded
  auto vexp = lib->function<void(const float*, float*)>("vexp");
  std::vector<float> in(width), out(width);
  for (int i = 0; i < width; ++i) in[i] = -3.0f + 0.4f * i;
  vexp(in.data(), out.data());
  for (int i = 0; i < width; ++i)
    EXPECT_NEAR(out[i], std::exp(in[i]), 1e-6 * std::exp(in[i])) << "lane " << i;
}
