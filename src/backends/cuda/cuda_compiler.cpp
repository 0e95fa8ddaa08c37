#include "backends/cuda/cuda_compiler.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>

#include <coil/error.h>

#include "backends/cuda/driver.h"
#include "backends/cuda/nvrtc.h"
#include "jit/source_parts.h"
#include "runtime/cuda_runtime.h"
#include "support/config.h"

namespace coil::cuda {

namespace {

// A source this large compiles in parts of at least kMinPartBytes (NVRTC pays for the prelude
// and its own start in each).
constexpr size_t kSplitBytes = 192 << 10;
constexpr size_t kMinPartBytes = 64 << 10;

// The device's architecture, or $COIL_CUDA_ARCH ("sm_90"), or sm_90 where there is no GPU.
std::string arch_of(int device) {
  if (std::optional<std::string> a = config::text(config::Var::CudaArch)) return *a;
  if (device < 0) return "sm_90";
  const DeviceInfo& info = device_info(device);
  return "sm_" + std::to_string(info.major) + std::to_string(info.minor);
}

}  // namespace

NvrtcCompiler::NvrtcCompiler(int device) : device_(device), arch_(arch_of(device)) {
  // IEEE floating point, as the CPU's code: no fast math, and no multiply-add contraction, so a
  // value a row kernel computes in two passes is the same in both (the deviations of a variance
  // from a mean of one element are exactly 0, as on the CPU, not a rounding error). Line numbers
  // for compute-sanitizer's reports, at no cost in speed.
  options_ = {"--gpu-architecture=" + arch_, "--std=c++17", "-default-device", "--fmad=false",
              "-lineinfo"};
}

std::vector<std::string> NvrtcCompiler::key_fields() const {
  std::vector<std::string> fields = {"nvrtc " + nvrtc_version()};
  fields.insert(fields.end(), options_.begin(), options_.end());
  return fields;
}

std::string NvrtcCompiler::name() const { return "NVRTC " + nvrtc_version() + " for " + arch_; }

jit::Compiler::Outcome NvrtcCompiler::compile(const std::string& source,
                                              const std::string& source_path,
                                              const std::string& output_path) const {
  // A large module compiles as several NVRTC programs on threads of their own (NVRTC's calls
  // are thread-safe), bundled into one binary (driver.h's cubin bundle).
  const size_t parts = jit::parts_for(source, kSplitBytes, kMinPartBytes);
  const std::vector<std::string> sources =
      parts < 2 ? std::vector<std::string>{source} : jit::split_source(source, parts);
  std::vector<NvrtcResult> results(sources.size());
  if (sources.size() == 1) {
    results[0] = nvrtc_compile(source, source_path, options_);
  } else {
    jit::run_parts(sources.size(), [&](size_t i) {
      results[i] =
          nvrtc_compile(sources[i], source_path + " (part " + std::to_string(i) + ")", options_);
    });
  }
  Outcome out;
  out.ok = true;
  for (const std::string& o : options_) out.log += o + " ";
  std::vector<std::string> cubins;
  for (NvrtcResult& r : results) {
    out.log += "\n" + r.log;
    out.ok = out.ok && r.ok;
    cubins.push_back(std::move(r.cubin));
  }
  out.failure = out.ok ? "" : "reported errors";
  if (out.ok) {
    const std::string binary = cubins.size() == 1 ? cubins[0] : bundle_cubins(cubins);
    std::ofstream file(output_path, std::ios::binary | std::ios::trunc);
    file.write(binary.data(), static_cast<std::streamsize>(binary.size()));
    if (!file) {
      out.ok = false;
      out.failure = "could not write " + output_path;
    }
  }
  return out;
}

std::shared_ptr<const jit::Module> NvrtcCompiler::load(const std::string& binary_path) const {
  COIL_CHECK(device_ >= 0, "jit: '", binary_path,
             "' was compiled for a GPU, but there is none to load it on");
  return std::make_shared<const CudaModule>(binary_path, device_);
}

void* hand_written_kernel(int device, const std::string& key, const std::string& name,
                          const std::function<std::string()>& source) {
  static std::mutex mutex;
  static auto* loaded = new std::map<std::tuple<int, std::string, std::string>,
                                     std::pair<std::shared_ptr<const jit::Module>, void*>>();
  std::lock_guard<std::mutex> lock(mutex);
  auto at = std::make_tuple(device, key, name);
  auto it = loaded->find(at);
  if (it == loaded->end()) {
    NvrtcCompiler compiler(device);
    auto module = jit::load(source(), compiler, key);
    void* f = static_cast<const CudaModule&>(*module).function(name);
    it = loaded->emplace(std::move(at), std::make_pair(module, f)).first;
  }
  return it->second.second;
}

}  // namespace coil::cuda
