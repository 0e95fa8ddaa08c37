#include "backends/cpu/library.h"

#include <dlfcn.h>

#include <coil/error.h>

namespace coil::cpu {

namespace {
std::string last_dl_error() {
  const char* message = ::dlerror();
  return message ? message : "unknown error";
}
}  // namespace

Library::Library(std::string path)
    : path_(std::move(path)), handle_(::dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL)) {
  COIL_CHECK(handle_, "jit: cannot load '", path_, "': ", last_dl_error(),
             "; if the file is damaged, delete it and coil will compile it again");
}

Library::~Library() { ::dlclose(handle_); }

void* Library::symbol(const std::string& name) const {
  ::dlerror();  // clear any earlier error, so the one read below is ours
  void* address = ::dlsym(handle_, name.c_str());
  COIL_CHECK(address, "jit: no symbol '", name, "' in '", path_, "' (", last_dl_error(),
             "); the generated code must define it with extern \"C\" linkage");
  return address;
}

}  // namespace coil::cpu
