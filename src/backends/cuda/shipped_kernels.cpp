// The kernels the CUDA backend writes by hand, as the build compiles them into the seed cache
// (jit/seed_cache.h): the dtypes and head sizes models use most. Any other is compiled at its
// first use, as before.
#include <algorithm>
#include <functional>

#include "backends/cuda/avg_pool.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_compiler.h"
#include "backends/cuda/flash_attention.h"
#include "backends/cuda/flash_attention_backward.h"
#include "backends/cuda/max_pool.h"
#include "backends/cuda/runtime_kernels.h"
#include "backends/cuda/scan_scatter.h"
#include "jit/code_cache.h"
#include "jit/source_parts.h"

namespace coil::cuda {

namespace {

struct Shipped {
  std::string name;
  std::function<std::string()> source;
};

std::vector<Shipped> shipped_kernels() {
  std::vector<Shipped> out;
  auto add = [&](std::string name, std::function<std::string()> source) {
    out.push_back({std::move(name), std::move(source)});
  };
  // Attention: GPT-2's and most models' heads of 64, and heads of 128, in every floating dtype.
  for (DType t : {kFloat32, kFloat16, kBFloat16, kFloat64})
    for (int64_t head : {64, 128})
      add(std::string("attention_") + dtype_short_name(t) + "_" + std::to_string(head),
          [t, head] { return attention_kernel_source(t, head, head); });
  // Its backward for float32 self-attention with heads of 64 (GPT-2's training step).
  add("attention_backward_f32_64", [] { return attention_backward_source(64); });
  add("random", [] { return random_kernel_source(); });
  // Copies and fills: each dtype to itself, and the float conversions.
  const std::pair<DType, DType> copies[] = {
      {kFloat32, kFloat32}, {kFloat64, kFloat64},  {kFloat16, kFloat16},  {kBFloat16, kBFloat16},
      {kInt64, kInt64},     {kInt32, kInt32},      {kBool, kBool},        {kFloat32, kFloat16},
      {kFloat16, kFloat32}, {kFloat32, kBFloat16}, {kBFloat16, kFloat32}, {kFloat32, kFloat64},
      {kFloat64, kFloat32}, {kFloat32, kInt64}};
  for (auto [dst, src] : copies)
    add(std::string("copy_") + dtype_short_name(dst) + "_" + dtype_short_name(src),
        [dst, src] { return copy_kernel_source(dst, src); });
  add("max_pool_f32", [] { return max_pool_kernel_source(kFloat32); });
  add("avg_pool_f32", [] { return avg_pool_kernel_source(kFloat32); });
  for (DType t : {kFloat32, kInt64})
    add(std::string("cumsum_") + dtype_short_name(t), [t] { return cumsum_kernel_source(t); });
  add("scatter_add_f32_i64", [] { return scatter_add_kernel_source(kFloat32, kInt64); });
  return out;
}

}  // namespace

int CudaBackend::precompile_library_kernels(std::vector<std::string>* names) const {
  const std::vector<Shipped> kernels = shipped_kernels();
  const NvrtcCompiler compiler(device_);
  // NVRTC's calls are thread-safe: as many compiles at once as COIL_COMPILE_THREADS or cores.
  const size_t jobs = std::min(jit::compile_jobs(), kernels.size());
  std::vector<char> made(kernels.size(), 0);
  jit::run_parts(jobs, [&](size_t job) {
    for (size_t i = job; i < kernels.size(); i += jobs)
      made[i] = jit::precompile(kernels[i].source(), compiler, kernels[i].name);
  });
  int compiled = 0;
  for (size_t i = 0; i < kernels.size(); ++i) {
    compiled += made[i];
    if (made[i] && names) names->push_back(kernels[i].name);
  }
  return compiled;
}

}  // namespace coil::cuda
