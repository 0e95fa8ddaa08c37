// A loaded shared library of generated C++ (the CPU backend's jit::Module). It stays loaded
// while a shared_ptr to it lives; a function pointer taken from it is valid only that long, so
// keep the Library with it.
#pragma once

#include <string>

#include "jit/module.h"

namespace coil::cpu {

class Library : public jit::Module {
 public:
  // Loads with RTLD_NOW, so an undefined symbol fails here rather than at the first call, and
  // RTLD_LOCAL, so two libraries' symbols of the same name never collide.
  explicit Library(std::string path);
  // Unloading is safe: generated code is header-free, so it registers no static destructors,
  // thread-locals or atexit handlers, and its OpenMP regions have ended when a call returns
  // (the thread pool lives in libgomp, which coil itself keeps loaded).
  ~Library() override;
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  // The address of `name` (an extern "C" symbol); coil::Error naming it and the file if absent.
  void* symbol(const std::string& name) const;
  // symbol() as a function pointer: lib.function<int(int)>("add1").
  template <typename Signature>
  Signature* function(const std::string& name) const {
    return reinterpret_cast<Signature*>(symbol(name));
  }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  void* handle_;
};

}  // namespace coil::cpu
