// What the code cache (code_cache.h) needs of a compiler: what decides the code it makes (for
// the cache key), the names of its files, how to run it and how to load what it made. Each
// device backend has one: the system C++ compiler and dlopen on the CPU
// (backends/cpu/cpp_compiler.h), NVRTC and the driver's module loader on CUDA.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "jit/module.h"

namespace coil::jit {

class Compiler {
 public:
  virtual ~Compiler() = default;

  // Everything besides the source that decides the binary: the compiler's identity, its
  // flags, the target machine. Part of the cache key.
  virtual std::vector<std::string> key_fields() const = 0;
  // The cache's file names: <key><source_extension> beside <key><binary_extension>.
  virtual const char* source_extension() const = 0;
  virtual const char* binary_extension() const = 0;
  // The compiler as error messages name it ("/usr/bin/g++", "NVRTC 13.0 for sm_90").
  virtual std::string name() const = 0;

  struct Outcome {
    bool ok = false;
    std::string failure;  // what went wrong, as "exited with status 1"
    std::string log;      // the compiler's output (with the command, when it ran one)
  };
  // Compiles `source`, already written at `source_path`, into `output_path`.
  virtual Outcome compile(const std::string& source, const std::string& source_path,
                          const std::string& output_path) const = 0;
  // Loads a binary this compiler made (coil::Error when it cannot); loader() names the way it
  // does, for the compile timeline ("dlopen").
  virtual const char* loader() const = 0;
  virtual std::shared_ptr<const Module> load(const std::string& binary_path) const = 0;
};

}  // namespace coil::jit
