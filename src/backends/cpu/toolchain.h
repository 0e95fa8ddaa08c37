// The C++ compiler coil runs, and everything about it that decides what a compiled library
// contains: the compiler's path and identity, its flags and the machine it targets. All of it
// goes into the cache key, so changing any of it compiles afresh.
#pragma once

#include <string>
#include <vector>

namespace coil::cpu {

struct Toolchain {
  std::string compiler;            // an absolute or relative path, never a bare name
  std::string version;             // the compiler's file: resolved path, size, modification time
  std::vector<std::string> flags;  // between the compiler and the output
  std::vector<std::string> libs;   // after the source file, where the linker wants them
  std::string machine;             // CPU model and feature flags, since flags say -march=native
};

// The toolchain as the environment says now: $COIL_CXX (a path or a name on PATH; default
// g++, else c++) and $COIL_CXXFLAGS (split at whitespace, appended to coil's flags). Throws
// coil::Error when no compiler is found.
Toolchain current_toolchain();

// The full command that compiles `source` into the shared library `output`.
std::vector<std::string> compile_command(const Toolchain& toolchain, const std::string& source,
                                         const std::string& output);
// The same in two steps, for a source compiled in parts: `source` into the object file
// `object`, then `objects` linked into the shared library `output`.
std::vector<std::string> object_command(const Toolchain& toolchain, const std::string& source,
                                        const std::string& object);
std::vector<std::string> link_command(const Toolchain& toolchain,
                                      const std::vector<std::string>& objects,
                                      const std::string& output);

}  // namespace coil::cpu
