#include "backends/cuda/driver.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string_view>

#include <coil/error.h>

#include "jit/disk_cache.h"
#include "runtime/cuda_runtime.h"
#include "support/config.h"

namespace coil::cuda {

namespace {

struct Driver {
  decltype(&cuModuleLoadData) load;
  decltype(&cuModuleUnload) unload;
  decltype(&cuModuleGetFunction) get_function;
  decltype(&cuModuleGetFunctionCount) function_count;
  decltype(&cuModuleEnumerateFunctions) enumerate_functions;
  decltype(&cuFuncGetName) function_name;
  decltype(&cuLaunchKernel) launch;
  decltype(&cuLaunchKernelEx) launch_ex;
  decltype(&cuFuncSetAttribute) set_attribute;
  decltype(&cuGetErrorName) error_name;
  decltype(&cuGetErrorString) error_string;
};

const Driver& driver() {
  static const Driver* d = [] {
    auto* out = new Driver;
    auto get = [](const char* name, auto& fn, int version = 12000) {
      void* p = nullptr;
      cudaDriverEntryPointQueryResult found{};
      check(cudaGetDriverEntryPointByVersion(name, &p, version, cudaEnableDefault, &found), name);
      COIL_CHECK(p && found == cudaDriverEntryPointSuccess, "cuda: the driver has no ", name,
                 "; update the GPU driver");
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
    };
    get("cuModuleLoadData", out->load);
    get("cuModuleUnload", out->unload);
    get("cuModuleGetFunction", out->get_function);
    get("cuModuleGetFunctionCount", out->function_count, 12040);
    get("cuModuleEnumerateFunctions", out->enumerate_functions, 12040);
    get("cuFuncGetName", out->function_name, 12030);
    get("cuLaunchKernel", out->launch);
    get("cuLaunchKernelEx", out->launch_ex);
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

namespace {

constexpr std::string_view kBundleMagic = "coil-cubins\n";

uint64_t read_u64(std::string_view bytes, size_t at) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i)
    v |= uint64_t(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return v;
}

void append_u64(std::string& out, uint64_t v) {
  for (size_t i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// The cubins of a binary: itself, or a bundle's parts. A malformed bundle is an error naming
// the file.
std::vector<std::string_view> cubins_of(std::string_view image, const std::string& path) {
  if (image.substr(0, kBundleMagic.size()) != kBundleMagic) return {image};
  auto bad = [&] { return Error("jit: '" + path + "' is a damaged bundle of cubins"); };
  size_t at = kBundleMagic.size();
  if (image.size() < at + 8) throw bad();
  const uint64_t count = read_u64(image, at);
  at += 8;
  if (count > (image.size() - at) / 8) throw bad();
  size_t data = at + 8 * count;
  std::vector<std::string_view> out;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t n = read_u64(image, at + 8 * i);
    if (n > image.size() - data) throw bad();
    out.push_back(image.substr(data, n));
    data += n;
  }
  return out;
}

}  // namespace

std::string bundle_cubins(const std::vector<std::string>& cubins) {
  std::string out(kBundleMagic);
  append_u64(out, cubins.size());
  for (const std::string& c : cubins) append_u64(out, c.size());
  for (const std::string& c : cubins) out += c;
  return out;
}

CudaModule::CudaModule(std::string path, int device) : path_(std::move(path)), device_(device) {
  std::ifstream in(path_, std::ios::binary);
  COIL_CHECK(in, "jit: cannot read '", path_, "'");
  std::stringstream bytes;
  bytes << in.rdbuf();
  std::string image = bytes.str();
  image.resize(jit::sealed_size(image));  // the code cache's seal follows the cubin
  set_device(device_);
  for (std::string_view cubin : cubins_of(image, path_)) {
    // The driver reads an image from aligned memory: each part is copied out of the bundle.
    const std::string part(cubin);
    CUmodule m = nullptr;
    CUresult r = driver().load(&m, part.data());
    if (r != CUDA_SUCCESS) {
      for (void* loaded : modules_) driver().unload(static_cast<CUmodule>(loaded));
      check_cu(r, "jit: cannot load '" + path_ + "'");
    }
    modules_.push_back(m);
  }
  if (modules_.size() > 1) index_bundle();
}

// A bundle's kernels are indexed by name once: asking each part in turn for a kernel it lacks
// is an API error that compute-sanitizer reports.
void CudaModule::index_bundle() {
  const std::string what = "jit: listing the kernels of '" + path_ + "'";
  for (void* m : modules_) {
    auto module = static_cast<CUmodule>(m);
    unsigned count = 0;
    check_cu(driver().function_count(&count, module), what);
    std::vector<CUfunction> fns(count);
    check_cu(driver().enumerate_functions(fns.data(), count, module), what);
    for (CUfunction f : fns) {
      const char* name = nullptr;
      check_cu(driver().function_name(&name, f), what);
      functions_[name] = f;
    }
  }
}

CudaModule::~CudaModule() {
  // The process's end tears contexts down first; an error here has nobody to tell.
  for (void* m : modules_) driver().unload(static_cast<CUmodule>(m));
}

void* CudaModule::function(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = functions_.find(name);
  if (it != functions_.end()) return it->second;
  CUfunction f = nullptr;
  CUresult r = modules_.size() == 1
                   ? driver().get_function(&f, static_cast<CUmodule>(modules_[0]), name.c_str())
                   : CUDA_ERROR_NOT_FOUND;  // a bundle's kernels are all indexed already
  check_cu(r, "jit: no kernel '" + name + "' in '" + path_ + "'");
  functions_[name] = f;
  return f;
}

bool programmatic_launches(int device) {
  static const bool allowed = config::flag(config::Var::CudaPdl);
  return allowed && device_info(device).major >= 9;
}

void launch(void* function, const std::string& kernel, int device, unsigned grid, unsigned block,
            unsigned shared, void** args, bool after_previous) {
  if (grid == 0) return;
  auto f = static_cast<CUfunction>(function);
  set_device(device);  // the driver launches in the thread's current context: the device's
  if (shared > 48 * 1024)
    check_cu(driver().set_attribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                    static_cast<int>(shared)),
             "launching " + kernel);
  const auto s = static_cast<CUstream>(stream(device));
  CUresult r;
  if (after_previous && programmatic_launches(device)) {
    CUlaunchAttribute overlap{};
    overlap.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    overlap.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig config{};
    config.gridDimX = grid;
    config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = block;
    config.blockDimY = config.blockDimZ = 1;
    config.sharedMemBytes = shared;
    config.hStream = s;
    config.attrs = &overlap;
    config.numAttrs = 1;
    r = driver().launch_ex(&config, f, args, nullptr);
  } else {
    r = driver().launch(f, grid, 1, 1, block, 1, 1, shared, s, args, nullptr);
  }
  // An error here may be an earlier kernel's, showing now: the message names that one too.
  if (r != CUDA_SUCCESS) check_cu(r, "launching kernel '" + kernel + "'", last_launch(device));
  note_launch(device, "kernel", kernel);
}

}  // namespace coil::cuda
