#include "backends/cuda/cublaslt.h"

#include <cublasLt.h>
#include <dlfcn.h>

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include <coil/cuda.h>
#include <coil/error.h>

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

// A handle and a workspace per device, kept for the process.
DeviceHandle& handle(int device) {
  static std::mutex mutex;
  static auto* handles = new std::map<int, DeviceHandle>();
  std::lock_guard<std::mutex> lock(mutex);
  DeviceHandle& h = (*handles)[device];
  if (!h.handle) {
    set_device(device);
    check_lt(lt().create(&h.handle), "cublasLtCreate");
    h.workspace = allocate(kWorkspace, device);
  }
  return h;
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
  auto tie() const {
    return std::tie(device, dtype, m, n, k, batch, a_batch, b_batch, a.rows, a.cols, a.ld,
                    a.transpose, b.rows, b.cols, b.ld, b.transpose, epilogue, add_c, tf32);
  }
  bool operator<(const Problem& o) const { return tie() < o.tie(); }
};

std::shared_ptr<Plan> make_plan(const Problem& p, cublasLtHandle_t handle) {
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
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t s = lt().heuristic(handle, plan->desc, plan->a, plan->b, plan->c, plan->c, pref, 1,
                                    &result, &found);
  lt().pref_destroy(pref);
  check_lt(s, "choosing an algorithm");
  COIL_CHECK(found > 0, "matmul on the GPU: cuBLASLt has no algorithm for ", dtype_name(p.dtype),
             " [", p.m, ", ", p.k, "] x [", p.k, ", ", p.n, "]");
  plan->algo = result.algo;
  return plan;
}

// Bounded: a program whose products keep changing size (a growing cache of keys) starts over.
constexpr size_t kMaxPlans = 1024;

std::shared_ptr<Plan> plan_for(const Problem& p, cublasLtHandle_t handle) {
  static std::mutex mutex;
  static auto* plans = new std::map<Problem, std::shared_ptr<Plan>>();
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = plans->find(p); it != plans->end()) return it->second;
  if (plans->size() >= kMaxPlans) plans->clear();
  return (*plans)[p] = make_plan(p, handle);
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
  DeviceHandle& h = handle(p.device);
  const std::shared_ptr<Plan> planned = plan_for(p, h.handle);
  Plan& plan = *planned;
  if (p.add_c) copy_into(out, bias);  // out = bias (broadcast), then out += a @ b
  const double one = 1.0, beta_d = p.add_c ? 1.0 : 0.0;
  const float onef = 1.0f, beta_f = p.add_c ? 1.0f : 0.0f;
  const bool f64 = p.dtype == kFloat64;
  const void* alpha = f64 ? static_cast<const void*>(&one) : &onef;
  const void* beta = f64 ? static_cast<const void*>(&beta_d) : &beta_f;
  set_device(p.device);
  std::lock_guard<std::mutex> lock(plan.mutex);
  if (vector_bias) {
    const void* ptr = bias.impl()->data();
    check_lt(lt().desc_set(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ptr, sizeof ptr),
             "the bias");
  }
  check_lt(
      lt().matmul(h.handle, plan.desc, alpha, b.impl()->data(), plan.a, a.impl()->data(), plan.b,
                  beta, out.impl()->data(), plan.c, out.impl()->data(), plan.c, &plan.algo,
                  h.workspace, kWorkspace, static_cast<cudaStream_t>(stream(p.device))),
      "cublasLtMatmul");
  note_launch(p.device, "cuBLASLt's matmul");
}

}  // namespace coil::cuda
