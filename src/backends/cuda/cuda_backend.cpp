#include "backends/cuda/cuda_backend.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <mutex>

#include <coil/error.h>

#include "backends/cuda/cuda_compiler.h"
#include "backends/cuda/cuda_kernel.h"
#include "backends/cuda/avg_pool.h"
#include "backends/cuda/cublaslt.h"
#include "backends/cuda/cudnn_calls.h"
#include "backends/cuda/cuda_prelude.h"
#include "backends/cuda/driver.h"
#include "backends/cuda/flash_attention.h"
#include "backends/cuda/flash_attention_backward.h"
#include "backends/cuda/kernel_autotune.h"
#include "backends/cuda/max_pool.h"
#include "backends/cuda/scan_scatter.h"
#include "graph/dims.h"
#include "jit/source_parts.h"
#include "runtime/copy.h"
#include "runtime/cuda_runtime.h"
#include "runtime/tensor_impl.h"

namespace coil {

namespace cuda {

namespace {

// conv2d's window from its arguments (or its backward ops', which keep the same positions).
ConvWindow window_of(const Args& a) {
  auto pair = [&](size_t i) { return std::array<int64_t, 2>{a.ints(i)[0], a.ints(i).back()}; };
  return ConvWindow{pair(3), pair(4), pair(5), a.i64(6)};
}

// The pool of an average-pooling op (or of its gradient) as cuDNN takes it, or nullopt for what
// cuDNN has no form of (ceil_mode, an adaptive pool whose windows differ in size).
std::optional<PoolWindow> pool_window(OpId op, const Args& a) {
  const bool backward = op == OpId::avg_pool2d_backward || op == OpId::adaptive_avg_pool2d_backward;
  const size_t self = backward ? 1 : 0;
  const Tensor& x = a.tensor(self);
  auto pair = [](const Shape& v) { return std::array<int64_t, 2>{v[0], v.back()}; };
  if (op == OpId::adaptive_avg_pool2d || op == OpId::adaptive_avg_pool2d_backward) {
    const std::array<int64_t, 2> out =
        backward ? std::array<int64_t, 2>{a.tensor(0).size(-2), a.tensor(0).size(-1)}
                 : pair(a.ints(1));
    const int64_t h = x.size(-2), w = x.size(-1);
    if (out[0] == 0 || out[1] == 0 || h % out[0] != 0 || w % out[1] != 0) return std::nullopt;
    const std::array<int64_t, 2> k{h / out[0], w / out[1]};
    return PoolWindow{k, k, {0, 0}, true};
  }
  const std::array<int64_t, 2> kernel = pair(a.ints(self + 1));
  const Shape& stride = a.ints(self + 2);
  if (a.b(self + 4)) return std::nullopt;  // ceil_mode
  return PoolWindow{kernel, stride.empty() ? kernel : pair(stride), pair(a.ints(self + 3)),
                    a.b(self + 5)};
}

// The same pool as coil's own kernels take it: any window.
AvgPoolWindow avg_window(OpId op, const Args& a) {
  if (op == OpId::adaptive_avg_pool2d || op == OpId::adaptive_avg_pool2d_backward)
    return {true, {}, {}, {}, false};
  const size_t self = op == OpId::avg_pool2d_backward ? 1 : 0;
  auto pair = [](const Shape& v) { return std::array<int64_t, 2>{v[0], v.back()}; };
  const Shape& stride = a.ints(self + 2);
  return {false, pair(a.ints(self + 1)), pair(stride.empty() ? a.ints(self + 1) : stride),
          pair(a.ints(self + 3)), a.b(self + 5)};
}

// The window of max_pool2d (input at 0) or of its gradients (input at 1): kernel, stride
// (empty: the kernel's), padding, dilation; the output's size carries ceil_mode.
MaxPoolWindow max_pool_window(const Args& a, size_t self) {
  auto pair = [](const Shape& v) { return std::array<int64_t, 2>{v[0], v.back()}; };
  const Shape& stride = a.ints(self + 2);
  return {pair(a.ints(self + 1)), pair(stride.empty() ? a.ints(self + 1) : stride),
          pair(a.ints(self + 3)), pair(a.ints(self + 4))};
}

// A 3-D (C, H, W) tensor as the 4-D batch of one that cuDNN takes.
Tensor batch_of_one(const Tensor& t) {
  if (t.dim() == 4) return t;
  return alias_with(t, {1, t.size(0), t.size(1), t.size(2)},
                    {t.numel(), t.stride(0), t.stride(1), t.stride(2)}, t.storage_offset());
}

}  // namespace

std::optional<std::vector<Tensor>> CudaBackend::library_kernel(
    OpId op, const std::vector<Arg>& args, const std::vector<TensorMeta>& metas) const {
  const Args a(args);
  auto product = [&](const Tensor& x, const Tensor& y, const Tensor& bias, Epilogue e) {
    Tensor out = empty_contiguous(metas.at(0).sizes, metas.at(0).dtype, metas.at(0).device);
    matmul(x, y, out, bias, e);
    return std::vector<Tensor>{out};
  };
  switch (op) {
    // Fills and copies: the runtime's kernels, which take sizes, strides and the value as
    // arguments, so an eager call compiles nothing (a scalar that changes every step, as an
    // optimizer's bias correction, would otherwise compile a kernel per value).
    case OpId::full: {
      Tensor out = empty_from_meta(metas.at(0));
      fill(out, a.scalar(1));
      return std::vector<Tensor>{out};
    }
    case OpId::contiguous:
      if (a.tensor(0).is_contiguous()) return std::vector<Tensor>{a.tensor(0)};
      [[fallthrough]];
    case OpId::clone:
      return std::vector<Tensor>{contiguous_copy(a.tensor(0))};
    case OpId::mm:
    case OpId::bmm:
      return product(a.tensor(0), a.tensor(1), Tensor(), Epilogue::none);
    case OpId::addmm:
      return product(a.tensor(1), a.tensor(2), a.tensor(0), Epilogue::none);
    case OpId::addmm_relu:
      return product(a.tensor(1), a.tensor(2), a.tensor(0), Epilogue::relu);
    // A scan and a scatter: kernels of coil's own (scan_scatter.h).
    case OpId::cumsum: {
      Tensor out = empty_from_meta(metas.at(0));
      const Tensor& x = a.tensor(0);
      cuda::cumsum(x.dtype() == out.dtype() ? x : x.to(out.dtype()),
                   wrap_dim(a.i64(1), x.dim(), "cumsum"), out);
      return std::vector<Tensor>{out};
    }
    case OpId::scatter_add: {
      Tensor out = empty_from_meta(metas.at(0));
      copy_into(out, a.tensor(0));
      cuda::scatter_add(out, wrap_dim(a.i64(1), out.dim(), "scatter_add"), a.tensor(2),
                        a.tensor(3));
      return std::vector<Tensor>{out};
    }
    // Convolutions: cuDNN's, when it loads (else the CPU's kernel on copies).
    case OpId::conv2d:
    case OpId::conv2d_input_backward:
    case OpId::conv2d_weight_backward: {
      if (!cudnn_available()) return std::nullopt;
      Tensor out = empty_from_meta(metas.at(0));
      const ConvWindow w = window_of(a);
      if (op == OpId::conv2d)
        conv2d_forward(batch_of_one(a.tensor(0)), a.tensor(1), a.opt_tensor(2), batch_of_one(out),
                       w);
      else if (op == OpId::conv2d_input_backward)
        conv2d_input_grad(a.tensor(0), a.tensor(2), out, w);
      else
        conv2d_weight_grad(a.tensor(0), a.tensor(1), out, w);
      return std::vector<Tensor>{out};
    }
    // Max pooling and its derivatives: kernels of coil's own (max_pool.h).
    case OpId::max_pool2d:
    case OpId::max_pool2d_backward:
    case OpId::max_pool2d_double_backward: {
      Tensor out = empty_from_meta(metas.at(0));
      if (op == OpId::max_pool2d)
        max_pool2d(a.tensor(0), out, max_pool_window(a, 0));
      else if (op == OpId::max_pool2d_backward)
        max_pool2d_backward(a.tensor(0), a.tensor(1), out, max_pool_window(a, 1));
      else
        max_pool2d_double_backward(a.tensor(0), a.tensor(1), out, max_pool_window(a, 1));
      return std::vector<Tensor>{out};
    }
    // Average pooling and its gradients: cuDNN's, where it has the pool (and loads); else
    // kernels of coil's own (avg_pool.h): ceil_mode, uneven adaptive windows, integers.
    case OpId::avg_pool2d:
    case OpId::adaptive_avg_pool2d:
    case OpId::avg_pool2d_backward:
    case OpId::adaptive_avg_pool2d_backward: {
      const bool forward = op == OpId::avg_pool2d || op == OpId::adaptive_avg_pool2d;
      const std::optional<PoolWindow> w = pool_window(op, a);
      Tensor out = empty_from_meta(metas.at(0));
      if (w && cudnn_available() && is_floating(a.tensor(0).dtype())) {
        if (forward)
          pool2d_forward(a.tensor(0), out, *w);
        else
          pool2d_backward(a.tensor(0), a.tensor(1), out, *w);
      } else if (forward) {
        avg_pool2d(a.tensor(0), out, avg_window(op, a));
      } else {
        avg_pool2d_backward(a.tensor(0), out, avg_window(op, a));
      }
      return std::vector<Tensor>{out};
    }
    // Attention without a mask (or with a causal one) and without dropout: coil's fused kernel;
    // otherwise the decomposition (or the CPU, when it declines).
    case OpId::scaled_dot_product_attention: {
      const Tensor &q = a.tensor(0), &v = a.tensor(2);
      if (!a.is_none(3) || a.f64(4) > 0 || q.size(-1) == 0 ||
          !attention_fits(q.size(-1), v.size(-1)))
        return std::nullopt;
      Tensor out = empty_from_meta(metas.at(0));
      const double scale = a.opt_f64(6).value_or(1 / std::sqrt(static_cast<double>(q.size(-1))));
      attention(q, a.tensor(1), v, out, scale, a.b(5));
      return std::vector<Tensor>{out};
    }
    // Its backward for self-attention: two kernels of coil's own, where they take the head
    // size and dtype (else the CPU, on copies).
    case OpId::scaled_dot_product_attention_backward: {
      const Tensor& q = a.tensor(1);
      if (!attention_backward_fits(q)) return std::nullopt;
      Tensor out = empty_from_meta(metas.at(0));
      const double scale = a.opt_f64(6).value_or(1 / std::sqrt(static_cast<double>(q.size(-1))));
      attention_backward(a.tensor(0), q, a.tensor(2), a.tensor(3), a.tensor(4), out, scale, a.b(5));
      return std::vector<Tensor>{out};
    }
    default:
      return std::nullopt;
  }
}

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
