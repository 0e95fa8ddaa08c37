// A loaded unit of generated code: a shared library on the CPU, a GPU module on CUDA. It stays
// loaded while a shared_ptr to it lives; a kernel taken from it is valid only that long, so
// whoever calls a kernel keeps its Module too.
#pragma once

#include <string>

namespace coil::jit {

class Module {
 public:
  virtual ~Module() = default;
  // The file it was loaded from (in the code cache).
  virtual const std::string& path() const = 0;
};

}  // namespace coil::jit
