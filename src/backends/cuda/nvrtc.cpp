#include "backends/cuda/nvrtc.h"

#include <dlfcn.h>
#include <nvrtc.h>

#include <mutex>

#include <coil/error.h>

namespace coil::cuda {

namespace {

struct Nvrtc {
  decltype(&nvrtcVersion) version;
  decltype(&nvrtcCreateProgram) create;
  decltype(&nvrtcDestroyProgram) destroy;
  decltype(&nvrtcCompileProgram) compile;
  decltype(&nvrtcGetProgramLogSize) log_size;
  decltype(&nvrtcGetProgramLog) log;
  decltype(&nvrtcGetCUBINSize) cubin_size;
  decltype(&nvrtcGetCUBIN) cubin;
  decltype(&nvrtcGetErrorString) error_string;
};

// Loaded once, from the toolkit coil was built with, else from the library path.
const Nvrtc& nvrtc() {
  static const Nvrtc* lib = [] {
    void* h = dlopen(COIL_CUDA_LIB_DIR "/libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
    COIL_CHECK(h, "cuda: cannot load NVRTC (libnvrtc.so.13): ", dlerror(),
               "; install the CUDA toolkit's runtime compiler or add its folder to "
               "LD_LIBRARY_PATH");
    auto sym = [&](const char* name) {
      void* p = dlsym(h, name);
      COIL_CHECK(p, "cuda: NVRTC has no ", name, "; it is older than coil expects");
      return p;
    };
    auto* n = new Nvrtc;
    n->version = reinterpret_cast<decltype(n->version)>(sym("nvrtcVersion"));
    n->create = reinterpret_cast<decltype(n->create)>(sym("nvrtcCreateProgram"));
    n->destroy = reinterpret_cast<decltype(n->destroy)>(sym("nvrtcDestroyProgram"));
    n->compile = reinterpret_cast<decltype(n->compile)>(sym("nvrtcCompileProgram"));
    n->log_size = reinterpret_cast<decltype(n->log_size)>(sym("nvrtcGetProgramLogSize"));
    n->log = reinterpret_cast<decltype(n->log)>(sym("nvrtcGetProgramLog"));
    n->cubin_size = reinterpret_cast<decltype(n->cubin_size)>(sym("nvrtcGetCUBINSize"));
    n->cubin = reinterpret_cast<decltype(n->cubin)>(sym("nvrtcGetCUBIN"));
    n->error_string = reinterpret_cast<decltype(n->error_string)>(sym("nvrtcGetErrorString"));
    return n;
  }();
  return *lib;
}

void check(nvrtcResult r, const char* what) {
  COIL_CHECK(r == NVRTC_SUCCESS, "cuda: ", what, " failed: ", nvrtc().error_string(r));
}

}  // namespace

std::string nvrtc_version() {
  int major = 0, minor = 0;
  check(nvrtc().version(&major, &minor), "nvrtcVersion");
  return std::to_string(major) + "." + std::to_string(minor);
}

NvrtcResult nvrtc_compile(const std::string& source, const std::string& name,
                          const std::vector<std::string>& options) {
  const Nvrtc& n = nvrtc();
  nvrtcProgram prog = nullptr;
  check(n.create(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram");
  std::vector<const char*> opts;
  for (const std::string& o : options) opts.push_back(o.c_str());
  NvrtcResult out;
  nvrtcResult r = n.compile(prog, static_cast<int>(opts.size()), opts.data());
  size_t size = 0;
  if (n.log_size(prog, &size) == NVRTC_SUCCESS && size > 1) {
    out.log.resize(size);
    n.log(prog, out.log.data());
    out.log.resize(size - 1);  // the terminating NUL
  }
  if (r == NVRTC_SUCCESS && n.cubin_size(prog, &size) == NVRTC_SUCCESS && size > 0) {
    out.cubin.resize(size);
    out.ok = n.cubin(prog, out.cubin.data()) == NVRTC_SUCCESS;
  } else if (out.log.empty()) {
    out.log = n.error_string(r);
  }
  n.destroy(&prog);
  return out;
}

}  // namespace coil::cuda
