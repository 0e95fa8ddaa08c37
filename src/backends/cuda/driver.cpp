#include "backends/cuda/driver.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <fstream>
#include <sstream>

#include <coil/error.h>

#include "jit/disk_cache.h"
#include "runtime/cuda_runtime.h"

namespace coil::cuda {

namespace {

struct Driver {
  decltype(&cuModuleLoadData) load;
  decltype(&cuModuleUnload) unload;
  decltype(&cuModuleGetFunction) get_function;
  decltype(&cuLaunchKernel) launch;
  decltype(&cuFuncSetAttribute) set_attribute;
  decltype(&cuGetErrorName) error_name;
  decltype(&cuGetErrorString) error_string;
};

const Driver& driver() {
  static const Driver* d = [] {
    auto* out = new Driver;
    auto get = [](const char* name, auto& fn) {
      void* p = nullptr;
      cudaDriverEntryPointQueryResult found{};
      check(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found), name);
      COIL_CHECK(p && found == cudaDriverEntryPointSuccess, "cuda: the driver has no ", name,
                 "; update the GPU driver");
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
    };
    get("cuModuleLoadData", out->load);
    get("cuModuleUnload", out->unload);
    get("cuModuleGetFunction", out->get_function);
    get("cuLaunchKernel", out->launch);
    get("cuFuncSetAttribute", out->set_attribute);
    get("cuGetErrorName", out->error_name);
    get("cuGetErrorString", out->error_string);
    return out;
  }();
  return *d;
}

void check_cu(CUresult r, const std::string& what, const std::string& context = "") {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* text = nullptr;
  driver().error_name(r, &name);
  driver().error_string(r, &text);
  throw Error(what + ": CUDA error " + (name ? name : "?") + " (" + (text ? text : "?") + ")" +
              context);
}

}  // namespace

CudaModule::CudaModule(std::string path, int device) : path_(std::move(path)), device_(device) {
  std::ifstream in(path_, std::ios::binary);
  COIL_CHECK(in, "jit: cannot read '", path_, "'");
  std::stringstream bytes;
  bytes << in.rdbuf();
  std::string image = bytes.str();
  image.resize(jit::sealed_size(image));  // the code cache's seal follows the cubin
  set_device(device_);
  CUmodule m = nullptr;
  check_cu(driver().load(&m, image.data()), "jit: cannot load '" + path_ + "'");
  module_ = m;
}

CudaModule::~CudaModule() {
  // The process's end tears contexts down first; an error here has nobody to tell.
  if (module_) driver().unload(static_cast<CUmodule>(module_));
}

void* CudaModule::function(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = functions_.find(name);
  if (it != functions_.end()) return it->second;
  CUfunction f = nullptr;
  check_cu(driver().get_function(&f, static_cast<CUmodule>(module_), name.c_str()),
           "jit: no kernel '" + name + "' in '" + path_ + "'");
  functions_[name] = f;
  return f;
}

void launch(void* function, const std::string& kernel, int device, unsigned grid, unsigned block,
            unsigned shared, void** args) {
  if (grid == 0) return;
  auto f = static_cast<CUfunction>(function);
  set_device(device);  // the driver launches in the thread's current context: the device's
  if (shared > 48 * 1024)
    check_cu(driver().set_attribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                    static_cast<int>(shared)),
             "launching " + kernel);
  CUresult r = driver().launch(f, grid, 1, 1, block, 1, 1, shared,
                               static_cast<CUstream>(stream(device)), args, nullptr);
  // An error here may be an earlier kernel's, showing now: the message names that one too.
  if (r != CUDA_SUCCESS) check_cu(r, "launching kernel '" + kernel + "'", last_launch(device));
  note_launch(device, "kernel", kernel);
}

}  // namespace coil::cuda
