#include "backends/cuda/cuda_backend.h"

#include <algorithm>
#include <atomic>
#include <mutex>

#include <coil/error.h>

#include "backends/cuda/cuda_compiler.h"
#include "backends/cuda/cuda_kernel.h"
#include "backends/cuda/cuda_prelude.h"
#include "backends/cuda/driver.h"
#include "backends/cuda/kernel_autotune.h"
#include "jit/source_parts.h"
#include "runtime/cuda_runtime.h"
#include "runtime/tensor_impl.h"

namespace coil {

namespace cuda {

std::optional<std::string> CudaBackend::library_call(const Node& n) const {
  if (op_info(n.op()).kind == OpKind::Extern) return "library kernel";
  return std::nullopt;
}

codegen::KernelSource CudaBackend::generate_kernel(const schedule::Kernel& k,
                                                   const ir::Program& program) const {
  return cuda::generate_kernel(k, program);
}

std::vector<codegen::KernelSource> CudaBackend::launch_alternatives(
    const schedule::Kernel& k, const ir::Program& program) const {
  return cuda::launch_alternatives(k, program);
}

std::string CudaBackend::module_source(const std::vector<codegen::KernelSource>& kernels) const {
  std::string s = cuda_prelude();
  for (const codegen::KernelSource& k : kernels) {
    if (!k.defines_function()) continue;
    s += std::string(jit::kPartBoundary) + k.code;
    for (const codegen::KernelSource& a : k.alternatives)
      s += std::string(jit::kPartBoundary) + a.code;
  }
  return s;
}

std::string_view CudaBackend::prelude() const { return cuda_prelude(); }

std::unique_ptr<jit::Compiler> CudaBackend::compiler() const {
  return std::make_unique<NvrtcCompiler>(device_);
}

Divider make_divider(int64_t d) {
  COIL_ASSERT(d >= 1, "cuda: a kernel divides by ", d, ", a size that must be positive");
  Divider v{d};
  while (v.s < 63 && (int64_t{1} << v.s) < d) ++v.s;
  const auto u = static_cast<unsigned __int128>(d);
  // 2^s - d < d, so m = 2^64 (2^s - d) / d + 1 fits in 64 bits.
  v.m = static_cast<uint64_t>(((static_cast<unsigned __int128>(1) << 64) *
                               ((static_cast<unsigned __int128>(1) << v.s) - u)) /
                                  u +
                              1);
  return v;
}

// The launch with the step's grid and block on coil's stream. The wrapper passes one pointer
// per buffer; a kernel with index checks gets a device-side error record after them, read once
// the kernel is done without the host waiting for it (cuda::defer_error_record: the error is
// raised at the host's next wait; the wrapper's host record stays clear). Under
// mode="max-autotune" a step with other launches runs the one its first call found fastest
// (kernel_autotune.h).
codegen::KernelCall CudaBackend::bind(const jit::Module& module,
                                      const codegen::WrapperPlan::Step& step) const {
  const auto& m = static_cast<const CudaModule&>(module);
  struct Candidate {
    void* function;
    std::string name;
    codegen::Launch launch;
    std::vector<sym::Expr> divisors;
  };
  std::vector<Candidate> candidates = {
      {m.function(step.kernel), step.kernel, step.launch, step.divisors}};
  for (const auto& a : step.alternatives)
    candidates.push_back({m.function(a.kernel), a.kernel, a.launch, a.divisors});
  const TunedKernel tuned{m.path(), step.kernel, m.device(), candidates.size()};
  const bool in_place =
      std::any_of(step.allocs.begin(), step.allocs.end(), [](const auto& a) { return a.in_place; });
  const size_t nargs = step.args.size();
  const bool checks = !step.index_checks.empty();
  // The tuned choice, once made: later calls read it here without asking again.
  auto chosen = std::make_shared<std::atomic<int>>(-1);
  auto index_checks = std::make_shared<const std::vector<codegen::IndexCheck>>(step.index_checks);
  return [candidates = std::move(candidates), tuned, in_place, nargs, checks, chosen,
          symbols = step.symbols, index_checks](void* const* args, const int64_t* sizes) {
    const int device = tuned.device;
    void* record = nullptr;
    if (checks) {
      record = cuda::allocate(2 * sizeof(int64_t), device);
      cuda::zero(record, 2 * sizeof(int64_t), device);
    }
    auto run = [&](size_t i) {
      const Candidate& c = candidates[i];
      std::vector<void*> params(nargs + 1 + symbols.size() + c.divisors.size());
      for (size_t a = 0; a < nargs; ++a) params[a] = const_cast<void**>(args) + a;
      size_t at = nargs;
      if (checks) params[at++] = &record;
      // Sizes by value: the launch copies each from the call's array.
      for (int s : symbols) params[at++] = const_cast<int64_t*>(sizes + s);
      std::vector<Divider> dividers;
      dividers.reserve(c.divisors.size());
      for (sym::Expr d : c.divisors) {
        dividers.push_back(make_divider(evaluate_sizes(d, sizes)));
        params[at++] = &dividers.back();
      }
      launch(c.function, c.name, device,
             static_cast<unsigned>(evaluate_sizes(c.launch.grid, sizes)),
             static_cast<unsigned>(c.launch.block), static_cast<unsigned>(c.launch.shared),
             params.data(), /*after_previous=*/true);
    };
    int pick = candidates.size() > 1 ? chosen->load(std::memory_order_relaxed) : 0;
    if (pick < 0) {
      std::string at_sizes;
      for (int s : symbols) at_sizes += (at_sizes.empty() ? "" : ", ") + std::to_string(sizes[s]);
      bool aliased = in_place;
      for (size_t a = 0; a < nargs && !aliased; ++a)
        for (size_t b = a + 1; b < nargs && !aliased; ++b) aliased = args[a] == args[b];
      const std::optional<size_t> decided = tuned_candidate(tuned, at_sizes, aliased, run);
      if (decided) chosen->store(static_cast<int>(*decided), std::memory_order_relaxed);
      pick = decided ? static_cast<int>(*decided) : 0;
    }
    run(static_cast<size_t>(pick));
    if (checks) {
      // The checks' bounds at this call's sizes; the message is made only for a failed one.
      std::vector<int64_t> bounds;
      for (const codegen::IndexCheck& c : *index_checks)
        bounds.push_back(evaluate_sizes(c.bound, sizes));
      cuda::defer_error_record(
          device, record, [index_checks, bounds](int64_t which, int64_t value) {
            const auto k = static_cast<size_t>(which - 1);
            return codegen::index_error_message(index_checks->at(k).op, value, bounds.at(k));
          });
    }
  };
}

}  // namespace cuda

namespace backends {

const DeviceBackend* cuda_backend(int device) {
  static std::mutex mutex;
  static std::vector<std::unique_ptr<cuda::CudaBackend>>* all = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (!all) all = new std::vector<std::unique_ptr<cuda::CudaBackend>>();
  const size_t slot = static_cast<size_t>(device + 1);  // -1: compile only
  if (all->size() <= slot) all->resize(slot + 1);
  if (!(*all)[slot]) (*all)[slot] = std::make_unique<cuda::CudaBackend>(device);
  return (*all)[slot].get();
}

}  // namespace backends

}  // namespace coil
