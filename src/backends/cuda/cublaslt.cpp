#include "backends/cuda/cublaslt.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <tuple>
#include <vector>

#include <coil/cuda.h>
#include <coil/error.h>

#include "backends/cuda/kernel_autotune.h"
#include "debug/log.h"
#include "jit/cache_key.h"
#include "jit/disk_cache.h"
#include "runtime/autotune.h"
#include "runtime/copy.h"
#include "runtime/cuda_runtime.h"
#include "runtime/tensor_impl.h"

namespace coil::cuda {

namespace {

struct Lt {
  decltype(&cublasLtCreate) create;
  decltype(&cublasLtGetStatusString) status_string;
  decltype(&cublasLtMatmulDescCreate) desc_create;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set;
  decltype(&cublasLtMatrixLayoutCreate) layout_create;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy;
  decltype(&cublasLtMatrixLayoutSetAttribute) layout_set;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic;
  decltype(&cublasLtMatmul) matmul;
  decltype(&cublasLtMatmulAlgoCheck) algo_check;
  decltype(&cublasLtGetVersion) version;
};

// Loaded on the first product (the library is large).
const Lt& lt() {
  static const Lt* lib = [] {
    void* h = dlopen(COIL_CUDA_LIB_DIR "/libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
    COIL_CHECK(h, "cuda: cannot load cuBLASLt (libcublasLt.so.13): ", dlerror(),
               "; install the CUDA toolkit's cuBLAS or add its folder to LD_LIBRARY_PATH");
    auto sym = [&](const char* name) {
      void* p = dlsym(h, name);
      COIL_CHECK(p, "cuda: cuBLASLt has no ", name, "; it is older than coil expects");
      return p;
    };
    auto* l = new Lt;
#define COIL_LT(field, name) l->field = reinterpret_cast<decltype(l->field)>(sym(#name))
    COIL_LT(create, cublasLtCreate);
    COIL_LT(status_string, cublasLtGetStatusString);
    COIL_LT(desc_create, cublasLtMatmulDescCreate);
    COIL_LT(desc_destroy, cublasLtMatmulDescDestroy);
    COIL_LT(desc_set, cublasLtMatmulDescSetAttribute);
    COIL_LT(layout_create, cublasLtMatrixLayoutCreate);
    COIL_LT(layout_destroy, cublasLtMatrixLayoutDestroy);
    COIL_LT(layout_set, cublasLtMatrixLayoutSetAttribute);
    COIL_LT(pref_create, cublasLtMatmulPreferenceCreate);
    COIL_LT(pref_destroy, cublasLtMatmulPreferenceDestroy);
    COIL_LT(pref_set, cublasLtMatmulPreferenceSetAttribute);
    COIL_LT(heuristic, cublasLtMatmulAlgoGetHeuristic);
    COIL_LT(matmul, cublasLtMatmul);
    COIL_LT(algo_check, cublasLtMatmulAlgoCheck);
    COIL_LT(version, cublasLtGetVersion);
#undef COIL_LT
    return l;
  }();
  return *lib;
}

void check_lt(cublasStatus_t s, const char* what) {
  COIL_CHECK(s == CUBLAS_STATUS_SUCCESS, "matmul on the GPU: ", what,
             " failed: ", lt().status_string(s));
}

constexpr size_t kWorkspace = size_t{32} << 20;

struct DeviceHandle {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
};

// A handle per device and a workspace per stream of it (products on two streams may run at
// once), kept for the process, as the streams are.
DeviceHandle handle(int device, void* stream) {
  static std::mutex mutex;
  static auto* handles = new std::map<int, cublasLtHandle_t>();
  static auto* workspaces = new std::map<void*, void*>();
  std::lock_guard<std::mutex> lock(mutex);
  cublasLtHandle_t& h = (*handles)[device];
  if (!h) {
    set_device(device);
    check_lt(lt().create(&h), "cublasLtCreate");
  }
  void*& w = (*workspaces)[stream];
  if (!w) w = allocate(kWorkspace, device);  // (from the stream's own cache)
  return {h, w};
}

// One operand as cuBLASLt sees it: the column-major matrix its memory holds (rows x cols, ld)
// and whether the product needs it transposed.
struct Operand {
  uint64_t rows, cols;
  int64_t ld;
  bool transpose;
};

// The operand X (r x c, row-major indices) as the left factor of the transposed product
// D^T = B^T A^T wants X^T: a row-major X is X^T in column-major memory; a column-major X
// (unit stride down its rows) is X itself, transposed by cuBLASLt.
std::optional<Operand> transposed_operand(int64_t r, int64_t c, int64_t s0, int64_t s1) {
  if (s1 == 1 && (s0 >= std::max<int64_t>(c, 1) || r == 1))
    return Operand{static_cast<uint64_t>(c), static_cast<uint64_t>(r), std::max<int64_t>(s0, c),
                   false};
  if (s0 == 1 && (s1 >= std::max<int64_t>(r, 1) || c == 1))
    return Operand{static_cast<uint64_t>(r), static_cast<uint64_t>(c), std::max<int64_t>(s1, r),
                   true};
  return std::nullopt;
}

cudaDataType_t data_type(DType t) {
  switch (t) {
    case DType::Float32:
      return CUDA_R_32F;
    case DType::Float64:
      return CUDA_R_64F;
    case DType::Float16:
      return CUDA_R_16F;
    case DType::BFloat16:
      return CUDA_R_16BF;
    default:
      throw Error(std::string("matmul on the GPU: ") + dtype_name(t) +
                  " is not supported; use a floating dtype");
  }
}

// One product's descriptors and algorithm, built once per problem: the heuristic query costs
// more than the product's launch. Immutable after construction except the bias pointer, which
// is set under `mutex` just before the launch.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::mutex mutex;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    for (cublasLtMatrixLayout_t l : {a, b, c})
      if (l) lt().layout_destroy(l);
    if (desc) lt().desc_destroy(desc);
  }
};

cublasLtMatrixLayout_t make_layout(cudaDataType_t t, uint64_t rows, uint64_t cols, int64_t ld,
                                   int32_t batch, int64_t batch_stride) {
  cublasLtMatrixLayout_t l = nullptr;
  check_lt(lt().layout_create(&l, t, rows, cols, ld), "cublasLtMatrixLayoutCreate");
  if (batch > 1) {
    check_lt(lt().layout_set(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch),
             "the batch count");
    check_lt(lt().layout_set(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch_stride,
                             sizeof batch_stride),
             "the batch stride");
  }
  return l;
}

// What decides a plan; the plans are kept for the process.
struct Problem {
  int device;
  DType dtype;
  int64_t m, n, k, batch, a_batch, b_batch;
  Operand a, b;
  cublasLtEpilogue_t epilogue;
  bool add_c;
  bool tf32;
  bool tuned;  // mode="max-autotune": the fastest candidate, not the heuristic's first
  auto tie() const {
    return std::tie(device, dtype, m, n, k, batch, a_batch, b_batch, a.rows, a.cols, a.ld,
                    a.transpose, b.rows, b.cols, b.ld, b.transpose, epilogue, add_c, tf32, tuned);
  }
  bool operator<(const Problem& o) const { return tie() < o.tie(); }
  // "[4096, 768] x [768, 50257] float32" with the batch and epilogue when there are any.
  std::string str() const {
    std::ostringstream os;
    os << (batch > 1 ? std::to_string(batch) + " x " : "") << "[" << m << ", " << k << "] x [" << k
       << ", " << n << "] " << dtype_name(dtype) << (tf32 ? " (TF32)" : "")
       << (epilogue != CUBLASLT_EPILOGUE_DEFAULT ? " with an epilogue" : "")
       << (add_c ? " plus C" : "");
    return os.str();
  }
};

// One launch's operands, as cuBLASLt takes them: A = B^T, B = A^T, and C = D = out.
struct Operands {
  const void* alpha;
  const void* beta;
  const void* a;
  const void* b;
  void* out;
  const void* bias;  // the epilogue's, or null
  void* workspace;
  cudaStream_t stream;
};

cublasStatus_t launch(const Plan& plan, cublasLtHandle_t handle, const Operands& o,
                      const cublasLtMatmulAlgo_t& algo) {
  return lt().matmul(handle, plan.desc, o.alpha, o.a, plan.a, o.b, plan.b, o.beta, o.out, plan.c,
                     o.out, plan.c, &algo, o.workspace, kWorkspace, o.stream);
}

void set_bias(Plan& plan, const void* bias) {
  check_lt(lt().desc_set(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
           "the bias");
}

// How many of the heuristic's algorithms max-autotune times, and how often each runs.
constexpr int kCandidates = 16;
constexpr int kTimedRuns = 5;

// The disk cache's key of a tuned problem: every field of the problem, the GPU and the library.
std::string tuning_key(const Problem& p) {
  const DeviceInfo& d = device_info(p.device);
  std::ostringstream os;
  const auto t = p.tie();
  std::apply([&](const auto&... f) { ((os << static_cast<int64_t>(f) << ","), ...); }, t);
  jit::Hasher h;
  h.add("cublaslt-autotune");
  h.add(os.str());
  h.add(d.name + " sm_" + std::to_string(d.major) + std::to_string(d.minor));
  h.add(std::to_string(lt().version()));
  return h.hex();
}

// An algorithm an earlier process chose, when its file is sound and cuBLASLt still takes it.
std::optional<cublasLtMatmulAlgo_t> saved_algo(const std::string& path, const Plan& plan,
                                               cublasLtHandle_t handle) {
  jit::SealedFile f = jit::read_sealed(path);
  if (f.state == jit::SealedFile::State::missing) return std::nullopt;
  cublasLtMatmulAlgo_t algo{};
  if (f.state == jit::SealedFile::State::damaged || f.contents.size() != 2 * sizeof algo) {
    jit::set_aside(path, f.state == jit::SealedFile::State::damaged ? f.why : "not an algorithm");
    return std::nullopt;
  }
  auto* bytes = reinterpret_cast<unsigned char*>(&algo);
  for (size_t i = 0; i < sizeof algo; ++i) {
    unsigned v = 0;
    if (std::sscanf(f.contents.c_str() + 2 * i, "%2x", &v) != 1) return std::nullopt;
    bytes[i] = static_cast<unsigned char>(v);
  }
  cublasLtMatmulHeuristicResult_t check{};
  if (lt().algo_check(handle, plan.desc, plan.a, plan.b, plan.c, plan.c, &algo, &check) !=
          CUBLAS_STATUS_SUCCESS ||
      check.workspaceSize > kWorkspace)
    return std::nullopt;
  jit::touch(path);
  return algo;
}

// The milliseconds of one run of `algo` (the median of kTimedRuns after a warm-up), or nullopt
// when cuBLASLt refuses to launch it.
std::optional<float> time_algo(const Plan& plan, cublasLtHandle_t handle, const Operands& o,
                               const cublasLtMatmulAlgo_t& algo) {
  return median_device_ms(o.stream, kTimedRuns,
                          [&] { return launch(plan, handle, o, algo) == CUBLAS_STATUS_SUCCESS; });
}

// max-autotune: the fastest of the heuristic's candidates on the call's own operands (their
// values are overwritten in `out` only), or the choice an earlier process stored on disk.
cublasLtMatmulAlgo_t tuned_algo(const Problem& p, const Plan& plan, cublasLtHandle_t handle,
                                const std::vector<cublasLtMatmulHeuristicResult_t>& candidates,
                                const Operands& o) {
  // The cache never fails a program: without a usable folder the choice is only not kept.
  auto not_kept = [](const std::exception& e) {
    debug::log("autotune", "cuBLASLt", std::string("the choice is not kept: ") + e.what());
  };
  std::string path;
  try {
    path = jit::open_cache_entry(tuning_key(p), "autotune").path(".algo");
  } catch (const std::exception& e) {
    not_kept(e);
  }
  if (std::optional<cublasLtMatmulAlgo_t> saved =
          path.empty() ? std::nullopt : saved_algo(path, plan, handle)) {
    debug::log("autotune", "cuBLASLt", p.str() + ": the algorithm chosen in an earlier run");
    return *saved;
  }
  std::string report = p.str() + ":";
  size_t best = 0;
  float best_ms = 0, first_ms = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    std::optional<float> ms = time_algo(plan, handle, o, candidates[i].algo);
    char line[64];
    if (ms)
      std::snprintf(line, sizeof line, "\n  candidate %zu: %.3f ms", i, *ms);
    else
      std::snprintf(line, sizeof line, "\n  candidate %zu: failed to launch", i);
    report += line;
    if (!ms) continue;
    if (i == 0) first_ms = *ms;
    if (best_ms == 0 || *ms < best_ms) best = i, best_ms = *ms;
  }
  char kept[96];
  std::snprintf(kept, sizeof kept, "\n  kept candidate %zu (%.2fx the heuristic's first)", best,
                best_ms > 0 && first_ms > 0 ? first_ms / best_ms : 1.0);
  debug::log("autotune", "cuBLASLt", report + kept);
  const cublasLtMatmulAlgo_t algo = candidates[best].algo;
  try {
    if (!path.empty())
      jit::write_file_atomically(path, jit::to_hex(&algo, sizeof algo), /*sealed=*/true);
  } catch (const std::exception& e) {
    not_kept(e);
  }
  return algo;
}

std::shared_ptr<Plan> make_plan(const Problem& p, cublasLtHandle_t handle, const Operands& o) {
  auto plan = std::make_shared<Plan>();
  const cudaDataType_t type = data_type(p.dtype);
  const bool f64 = p.dtype == kFloat64;
  const cublasComputeType_t compute = f64      ? CUBLAS_COMPUTE_64F
                                      : p.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                               : CUBLAS_COMPUTE_32F;
  check_lt(lt().desc_create(&plan->desc, compute, f64 ? CUDA_R_64F : CUDA_R_32F),
           "cublasLtMatmulDescCreate");
  cublasOperation_t ta = p.a.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t tb = p.b.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_lt(lt().desc_set(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "TRANSA");
  check_lt(lt().desc_set(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "TRANSB");
  check_lt(lt().desc_set(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &p.epilogue, sizeof p.epilogue),
           "the epilogue");
  const int32_t batch = static_cast<int32_t>(p.batch);
  plan->a = make_layout(type, p.a.rows, p.a.cols, p.a.ld, batch, p.b_batch);
  plan->b = make_layout(type, p.b.rows, p.b.cols, p.b.ld, batch, p.a_batch);
  plan->c = make_layout(type, static_cast<uint64_t>(p.n), static_cast<uint64_t>(p.m), p.n, batch,
                        p.m * p.n);
  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(lt().pref_create(&pref), "cublasLtMatmulPreferenceCreate");
  uint64_t ws = kWorkspace;
  lt().pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  std::vector<cublasLtMatmulHeuristicResult_t> results(p.tuned ? kCandidates : 1);
  int found = 0;
  cublasStatus_t s = lt().heuristic(handle, plan->desc, plan->a, plan->b, plan->c, plan->c, pref,
                                    static_cast<int>(results.size()), results.data(), &found);
  lt().pref_destroy(pref);
  check_lt(s, "choosing an algorithm");
  COIL_CHECK(found > 0, "matmul on the GPU: cuBLASLt has no algorithm for ", dtype_name(p.dtype),
             " [", p.m, ", ", p.k, "] x [", p.k, ", ", p.n, "]");
  results.resize(static_cast<size_t>(found));
  if (!p.tuned || found == 1) {
    plan->algo = results[0].algo;
    return plan;
  }
  if (o.bias) set_bias(*plan, o.bias);
  plan->algo = tuned_algo(p, *plan, handle, results, o);
  return plan;
}

// Bounded: a program whose products keep changing size (a growing cache of keys) starts over.
constexpr size_t kMaxPlans = 1024;

struct Plans {
  std::mutex mutex;
  std::map<Problem, std::shared_ptr<Plan>> map;
};
Plans& plans() {
  static auto* all = new Plans;
  return *all;
}

std::shared_ptr<Plan> plan_for(const Problem& p, cublasLtHandle_t handle, const Operands& o) {
  Plans& all = plans();
  std::lock_guard<std::mutex> lock(all.mutex);
  if (auto it = all.map.find(p); it != all.map.end()) return it->second;
  if (all.map.size() >= kMaxPlans) all.map.clear();
  return all.map[p] = make_plan(p, handle, o);
}

// Timing synchronises, which a stream being recorded into a CUDA graph must not do.
bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(stream, &status) == cudaSuccess &&
         status != cudaStreamCaptureStatusNone;
}

}  // namespace

void matmul(const Tensor& a_in, const Tensor& b_in, const Tensor& out, const Tensor& bias,
            Epilogue epilogue) {
  const bool batched = out.dim() == 3;
  Tensor a = a_in, b = b_in;
  auto as_operand = [&](Tensor& t, int64_t r, int64_t c) {
    std::optional<Operand> op = transposed_operand(r, c, t.stride(-2), t.stride(-1));
    if (!op) {  // neither rows nor columns unit-stride: a contiguous copy
      t = t.contiguous();
      op = transposed_operand(r, c, t.stride(-2), t.stride(-1));
    }
    return *op;
  };
  Problem p;
  p.device = out.device().index;
  p.dtype = out.dtype();
  p.m = out.size(-2);
  p.n = out.size(-1);
  p.k = a.size(-1);
  p.batch = batched ? out.size(0) : 1;
  p.tf32 = p.dtype == kFloat32 && matmul_allow_tf32();
  p.a = as_operand(b, p.k, p.n);  // cuBLASLt's first factor: B^T (N x K)
  p.b = as_operand(a, p.m, p.k);  // its second: A^T (K x M)
  p.a_batch = batched && a.dim() == 3 ? a.stride(0) : 0;
  p.b_batch = batched && b.dim() == 3 ? b.stride(0) : 0;
  // A bias of one value per output column is the epilogue's; any other is added as C.
  const bool vector_bias = bias.defined() && bias.numel() == p.n && bias.is_contiguous() &&
                           (bias.dim() == 1 || (bias.dim() == 2 && bias.size(0) == 1)) &&
                           bias.dtype() == out.dtype() && !batched;
  p.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  if (vector_bias)
    p.epilogue = epilogue == Epilogue::relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  else if (epilogue == Epilogue::relu)
    p.epilogue = CUBLASLT_EPILOGUE_RELU;
  p.add_c = bias.defined() && !vector_bias;
  const DeviceHandle h = handle(p.device, stream(p.device));
  const double one = 1.0, beta_d = p.add_c ? 1.0 : 0.0;
  const float onef = 1.0f, beta_f = p.add_c ? 1.0f : 0.0f;
  const bool f64 = p.dtype == kFloat64;
  set_device(p.device);
  const Operands o{f64 ? static_cast<const void*>(&one) : &onef,
                   f64 ? static_cast<const void*>(&beta_d) : &beta_f,
                   b.impl()->data(),
                   a.impl()->data(),
                   out.impl()->data(),
                   vector_bias ? bias.impl()->data() : nullptr,
                   h.workspace,
                   static_cast<cudaStream_t>(stream(p.device))};
  p.tuned = autotuning() && !capturing(o.stream);
  const std::shared_ptr<Plan> planned = plan_for(p, h.handle, o);
  Plan& plan = *planned;
  if (p.add_c) copy_into(out, bias);  // out = bias (broadcast), then out += a @ b
  std::lock_guard<std::mutex> lock(plan.mutex);
  if (vector_bias) set_bias(plan, o.bias);
  check_lt(launch(plan, h.handle, o, plan.algo), "cublasLtMatmul");
  note_launch(p.device, "cuBLASLt's matmul");
}

void forget_matmul_plans() {
  Plans& all = plans();
  std::lock_guard<std::mutex> lock(all.mutex);
  all.map.clear();
}

}  // namespace coil::cuda
