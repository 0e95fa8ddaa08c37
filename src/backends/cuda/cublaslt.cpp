#include "backends/cuda/cublaslt.h"

#include <cublasLt.h>
#include <dlfcn.h>

#include <map>
#include <mutex>
#include <tuple>

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

struct Layout {
  cublasLtMatrixLayout_t l = nullptr;
  Layout(cudaDataType_t t, uint64_t rows, uint64_t cols, int64_t ld, int32_t batch,
         int64_t batch_stride) {
    check_lt(lt().layout_create(&l, t, rows, cols, ld), "cublasLtMatrixLayoutCreate");
    if (batch > 1) {
      check_lt(lt().layout_set(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch),
               "the batch count");
      check_lt(lt().layout_set(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch_stride,
                               sizeof batch_stride),
               "the batch stride");
    }
  }
  ~Layout() { lt().layout_destroy(l); }
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;
};

}  // namespace

void matmul(const Tensor& a_in, const Tensor& b_in, const Tensor& out, const Tensor& bias,
            Epilogue epilogue) {
  const bool batched = out.dim() == 3;
  Tensor a = a_in, b = b_in;
  const int64_t M = out.size(-2), N = out.size(-1), K = a.size(-1);
  const int32_t batch = batched ? static_cast<int32_t>(out.size(0)) : 1;
  auto matrix_strides = [&](const Tensor& t) { return std::make_pair(t.stride(-2), t.stride(-1)); };
  auto as_operand = [&](Tensor& t, int64_t r, int64_t c) {
    auto [s0, s1] = matrix_strides(t);
    std::optional<Operand> op = transposed_operand(r, c, s0, s1);
    if (!op) {  // neither rows nor columns unit-stride: a contiguous copy
      t = t.contiguous();
      op = transposed_operand(r, c, t.stride(-2), t.stride(-1));
    }
    return *op;
  };
  Operand A = as_operand(b, K, N);  // cuBLASLt's first factor: B^T (N x K)
  Operand B = as_operand(a, M, K);  // its second: A^T (K x M)
  const int64_t a_batch = batched && a.dim() == 3 ? a.stride(0) : 0;
  const int64_t b_batch = batched && b.dim() == 3 ? b.stride(0) : 0;
  const cudaDataType_t type = data_type(out.dtype());
  const cublasComputeType_t compute =
      out.dtype() == kFloat64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  const int device = out.device().index;
  DeviceHandle& h = handle(device);

  cublasLtMatmulDesc_t desc = nullptr;
  check_lt(lt().desc_create(&desc, compute, out.dtype() == kFloat64 ? CUDA_R_64F : CUDA_R_32F),
           "cublasLtMatmulDescCreate");
  struct DescGuard {
    cublasLtMatmulDesc_t d;
    ~DescGuard() { lt().desc_destroy(d); }
  } desc_guard{desc};
  cublasOperation_t ta = A.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t tb = B.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_lt(lt().desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "TRANSA");
  check_lt(lt().desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "TRANSB");
  // A bias of one value per output column is the epilogue's; any other is added as C.
  const bool vector_bias = bias.defined() && bias.numel() == N && bias.is_contiguous() &&
                           (bias.dim() == 1 || (bias.dim() == 2 && bias.size(0) == 1)) &&
                           bias.dtype() == out.dtype() && !batched;
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  if (vector_bias)
    epi = epilogue == Epilogue::relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  else if (epilogue == Epilogue::relu)
    epi = CUBLASLT_EPILOGUE_RELU;
  check_lt(lt().desc_set(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "the epilogue");
  if (vector_bias) {
    const void* p = bias.impl()->data();
    check_lt(lt().desc_set(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p, sizeof p), "the bias");
  }
  const bool add_c = bias.defined() && !vector_bias;
  if (add_c) copy_into(out, bias);  // out = bias (broadcast), then out += a @ b

  Layout la(type, A.rows, A.cols, A.ld, batch, b_batch);
  Layout lb(type, B.rows, B.cols, B.ld, batch, a_batch);
  Layout lc(type, static_cast<uint64_t>(N), static_cast<uint64_t>(M), N, batch, M * N);

  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(lt().pref_create(&pref), "cublasLtMatmulPreferenceCreate");
  uint64_t ws = kWorkspace;
  lt().pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t s =
      lt().heuristic(h.handle, desc, la.l, lb.l, lc.l, lc.l, pref, 1, &result, &found);
  lt().pref_destroy(pref);
  check_lt(s, "choosing an algorithm");
  COIL_CHECK(found > 0, "matmul on the GPU: cuBLASLt has no algorithm for ",
             dtype_name(out.dtype()), " [", M, ", ", K, "] x [", K, ", ", N, "]");
  const double one = 1.0, beta_d = add_c ? 1.0 : 0.0;
  const float onef = 1.0f, beta_f = add_c ? 1.0f : 0.0f;
  const bool f64 = out.dtype() == kFloat64;
  const void* alpha = f64 ? static_cast<const void*>(&one) : &onef;
  const void* beta = f64 ? static_cast<const void*>(&beta_d) : &beta_f;
  set_device(device);
  check_lt(lt().matmul(h.handle, desc, alpha, b.impl()->data(), la.l, a.impl()->data(), lb.l, beta,
                       out.impl()->data(), lc.l, out.impl()->data(), lc.l, &result.algo,
                       h.workspace, kWorkspace, static_cast<cudaStream_t>(stream(device))),
           "cublasLtMatmul");
  note_launch(device, "cuBLASLt's matmul");
}

}  // namespace coil::cuda
