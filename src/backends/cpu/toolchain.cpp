#include "backends/cpu/toolchain.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <coil/error.h>

#include "jit/disk_cache.h"
#include "support/config.h"

namespace coil::cpu {

namespace {

// -fno-semantic-interposition lets calls between the library's own functions be inlined;
// -fno-math-errno and -fno-trapping-math let math vectorise without changing results.
const std::vector<std::string> kFlags = {"-O3",
                                         "-march=native",
                                         "-fopenmp",
                                         "-shared",
                                         "-fPIC",
                                         "-std=c++17",
                                         "-fno-math-errno",
                                         "-fno-trapping-math",
                                         "-fno-semantic-interposition"};
// Generated code declares SLEEF's vector math itself (no headers), so only the link needs it.
const std::vector<std::string> kLibs = {"-lsleef", "-lm"};

bool is_executable_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// Where the shell would find `name`: itself if it names a path, else the first match on PATH.
// Empty when there is none.
std::string find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return is_executable_file(name) ? name : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (is_executable_file(candidate)) return candidate;
  }
  return "";
}

std::string resolve_compiler() {
  if (const std::optional<std::string> cxx = config::text(config::Var::Cxx)) {
    std::string path = find_program(*cxx);
    COIL_CHECK(!path.empty(), "jit: COIL_CXX='", *cxx,
               "' is neither an executable file nor a program on PATH; set COIL_CXX to a C++ "
               "compiler such as g++ or clang++");
    return path;
  }
  for (const char* name : {"g++", "c++"}) {
    if (std::string path = find_program(name); !path.empty()) return path;
  }
  throw Error(
      "jit: no C++ compiler found (neither g++ nor c++ is on PATH); install g++ or set COIL_CXX "
      "to a compiler's path");
}

// The compiler's identity without running it (starting `g++ --version` is a process start, paid by
// every process's warm-cache first call): the file the path resolves to (g++ -> g++-12 -> ...), its
// size and its modification time, as ccache's default compiler check. Installing another compiler
// version replaces that file, and so changes every cache key.
std::string compiler_identity(const std::string& compiler) {
  std::string id = jit::file_identity(compiler);
  COIL_CHECK(!id.empty(), "jit: cannot read the C++ compiler '", compiler,
             "'; set COIL_CXX to a working C++ compiler");
  return id;
}

// The CPU's model name and feature flags (x86 "flags", Arm "Features"), read once. Never
// destroyed: a compile on its own thread (the background compile) may still read it while the
// program's static objects are destroyed at exit.
const std::string& machine_id() {
  static const std::string& id = *new std::string([] {
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line, model, features;
    while (std::getline(cpuinfo, line) && (model.empty() || features.empty())) {
      if (model.empty() && line.rfind("model name", 0) == 0) model = line;
      if (features.empty() && (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0))
        features = line;
    }
    return model + "\n" + features;
  }());
  return id;
}

std::vector<std::string> flags_from_env() {
  std::vector<std::string> flags = kFlags;
  // gold links a small library much faster than the default linker (which spends most of that time
  // reading the C++ runtime's symbols), shortening every kernel's cold compile (measured:
  // docs/performance.md). Binutils ships it beside ld; where it is missing, the default linker does
  // the job.
  if (!find_program("ld.gold").empty()) flags.push_back("-fuse-ld=gold");
  if (const std::optional<std::string> extra = config::text(config::Var::CxxFlags)) {
    std::istringstream words(*extra);
    std::string word;
    while (words >> word) flags.push_back(word);
  }
  return flags;
}

}  // namespace

Toolchain current_toolchain() {
  Toolchain t;
  t.compiler = resolve_compiler();
  t.version = compiler_identity(t.compiler);
  t.flags = flags_from_env();
  t.libs = kLibs;
  t.machine = machine_id();
  return t;
}

std::vector<std::string> compile_command(const Toolchain& toolchain, const std::string& source,
                                         const std::string& output) {
  std::vector<std::string> argv = {toolchain.compiler};
  argv.insert(argv.end(), toolchain.flags.begin(), toolchain.flags.end());
  argv.insert(argv.end(), {"-o", output, source});
  argv.insert(argv.end(), toolchain.libs.begin(), toolchain.libs.end());
  return argv;
}

std::vector<std::string> object_command(const Toolchain& toolchain, const std::string& source,
                                        const std::string& object) {
  std::vector<std::string> argv = {toolchain.compiler};
  argv.insert(argv.end(), toolchain.flags.begin(), toolchain.flags.end());
  argv.insert(argv.end(), {"-c", "-o", object, source});
  return argv;
}

std::vector<std::string> link_command(const Toolchain& toolchain,
                                      const std::vector<std::string>& objects,
                                      const std::string& output) {
  std::vector<std::string> argv = {toolchain.compiler};
  argv.insert(argv.end(), toolchain.flags.begin(), toolchain.flags.end());
  argv.insert(argv.end(), {"-o", output});
  argv.insert(argv.end(), objects.begin(), objects.end());
  argv.insert(argv.end(), toolchain.libs.begin(), toolchain.libs.end());
  return argv;
}

}  // namespace coil::cpu
