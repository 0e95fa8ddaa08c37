#include "runtime/kernels/blas.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include <coil/error.h>

namespace coil {

namespace {

template <typename F>
F resolve(void* lib, const char* name) {
  void* f = dlsym(lib, name);
  COIL_CHECK(f, "OpenBLAS (", COIL_BLAS_PATH, ") has no symbol ", name,
             "; install Debian's libopenblas0-openmp");
  return reinterpret_cast<F>(f);
}

// OpenBLAS picks its kernels by OPENBLAS_CORETYPE when it loads (lazily, at the first
// product). The variable is set while the program starts, before any thread of coil's runs:
// setenv while another thread starts a process (a kernel compiling in the background,
// jit/subprocess.cpp) can hand that process a torn environment (posix_spawn: EFAULT).
const bool kCoreTypeSet = [] {
  __builtin_cpu_init();
  if (!std::getenv("OPENBLAS_CORETYPE") && __builtin_cpu_supports("avx512f"))
    setenv("OPENBLAS_CORETYPE", "SkylakeX", 0);
  return true;
}();

Blas load() {
  void* lib = dlopen(COIL_BLAS_PATH, RTLD_NOW | RTLD_GLOBAL);
  COIL_CHECK(lib, "cannot load OpenBLAS from ", COIL_BLAS_PATH, ": ", dlerror(),
             "; install Debian's libopenblas0-openmp");
  auto corename = resolve<char* (*)()>(lib, "openblas_get_corename");
  return Blas{resolve<decltype(&cblas_sgemm)>(lib, "cblas_sgemm"),
              resolve<decltype(&cblas_dgemm)>(lib, "cblas_dgemm"),
              resolve<decltype(&cblas_sgemv)>(lib, "cblas_sgemv"),
              resolve<decltype(&cblas_dgemv)>(lib, "cblas_dgemv"), corename()};
}

}  // namespace

const Blas& blas() {
  static const Blas b = load();
  return b;
}

}  // namespace coil
