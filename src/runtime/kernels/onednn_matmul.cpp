#include "runtime/kernels/onednn_matmul.h"

#include "runtime/kernels/onednn_dtype.h"

#include <dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace coil {

namespace {

using Dims = dnnl::memory::dims;

// Everything a primitive is made for; the matrices' addresses come with each call.
struct Geometry {
  DType dtype;
  int64_t batch, m, n, k;
  StridedMats a, b;  // strides only
  int64_t c_batch, ldc;
  bool accumulate;
  bool row_bias;

  std::array<int64_t, 15> key() const {
    return {static_cast<int64_t>(dtype),
            batch,
            m,
            n,
            k,
            a.batch,
            a.row,
            a.col,
            b.batch,
            b.row,
            b.col,
            c_batch,
            ldc,
            accumulate,
            row_bias};
  }
};

struct Prepared {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
};

// Creating a primitive costs far more than running a small one: each geometry is made once,
// and entries are never removed (pointers to them stay valid).
struct Cache {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  std::mutex mu;
  std::map<std::array<int64_t, 15>, Prepared> primitives;
};

Cache& cache() {
  static Cache c;
  return c;
}

// From this many multiply-adds on, a single product takes oneDNN's jit gemm rather than the
// brgemm kernels it lists first. At GPT-2 small's training shapes on 16 cores brgemm reaches
// about half the jit gemm's rate where B is read row-major and wide (4096 x 768 x 3072 with
// B 768 x 3072; the 50257-wide head's gradients 25-40 % slower), and is never ahead by more
// than the run-to-run spread. The jit gemm makes all its kernels on a process's first call
// (tens of ms), which a product this large repays; smaller ones keep brgemm, whose kernels
// are made per shape at a fraction of that (measured: docs/performance.md). bfloat16 too: its
// jit gemm beat the AMX brgemm at 4096 x 768 x 3072 (docs/performance.md).
constexpr int64_t kJitGemmWork = int64_t{1} << 32;

// The primitive descriptor of the implementation whose name starts with `prefix`, if oneDNN
// lists one for `d`.
std::optional<dnnl::matmul::primitive_desc> implementation(const dnnl::matmul::desc& d,
                                                           const dnnl::primitive_attr& attr,
                                                           const dnnl::engine& engine,
                                                           const std::string& prefix) {
  dnnl::matmul::primitive_desc pd(d, attr, engine);
  do {
    if (std::string(pd.impl_info_str()).rfind(prefix, 0) == 0) return pd;
  } while (pd.next_impl());
  return std::nullopt;
}

// A batch of `batch` rows x cols matrices. A batch of one still needs a batch stride that
// oneDNN can match to a plain layout: with stride 1 it reads the matrices as "bca", which its
// brgemm kernels decline, and the generic jit gemm it falls back to spends a long time
// generating its kernels on a process's first product (measured: docs/performance.md).
dnnl::memory::desc desc(DType t, int64_t batch, int64_t rows, int64_t cols, int64_t batch_stride,
                        int64_t row_stride, int64_t col_stride) {
  if (batch == 1) batch_stride = std::max(rows * row_stride, cols * col_stride);
  return dnnl::memory::desc(Dims{batch, rows, cols}, onednn_data_type(t),
                            Dims{batch_stride, row_stride, col_stride});
}

// A bias of n elements, one per column, added to every row of every matrix of the batch.
dnnl::memory::desc row_bias_desc(DType t, int64_t n) {
  return dnnl::memory::desc(Dims{1, 1, n}, onednn_data_type(t), Dims{n, n, 1});
}

// The primitive for `g`, made on first use; nullptr where oneDNN cannot take it (positive
// strides only; a broadcast batch, stride 0, only for a batch of one) or has no kernel for it.
const Prepared* prepare(const Geometry& g) {
  for (int64_t s : {g.a.row, g.a.col, g.b.row, g.b.col})
    if (s <= 0) return nullptr;
  if (g.batch > 1 && (g.a.batch <= 0 || g.b.batch <= 0)) return nullptr;
  Cache& cc = cache();
  std::lock_guard<std::mutex> lock(cc.mu);
  auto it = cc.primitives.find(g.key());
  if (it != cc.primitives.end()) return &it->second;
  dnnl::primitive_attr attr;
  if (g.accumulate) {  // the sum post-op: each block of the result adds what C held
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  try {
    dnnl::memory::desc src = desc(g.dtype, g.batch, g.m, g.k, g.a.batch, g.a.row, g.a.col),
                       weights = desc(g.dtype, g.batch, g.k, g.n, g.b.batch, g.b.row, g.b.col),
                       dst = desc(g.dtype, g.batch, g.m, g.n, g.c_batch, g.ldc, 1);
    dnnl::matmul::desc d = g.row_bias
                               ? dnnl::matmul::desc(src, weights, row_bias_desc(g.dtype, g.n), dst)
                               : dnnl::matmul::desc(src, weights, dst);
    std::optional<dnnl::matmul::primitive_desc> jit_gemm;
    if (g.batch == 1 && g.m * g.n * g.k >= kJitGemmWork)
      jit_gemm = implementation(d, attr, cc.engine, "gemm:jit");
    dnnl::matmul::primitive_desc pd =
        jit_gemm ? *jit_gemm : dnnl::matmul::primitive_desc(d, attr, cc.engine);
    return &cc.primitives.emplace(g.key(), Prepared{pd, dnnl::matmul(pd)}).first->second;
  } catch (const dnnl::error&) {
    return nullptr;  // a geometry oneDNN has no kernel for
  }
}

void execute(const Prepared& p, const void* a, const void* b, void* c, const void* row_bias) {
  Cache& cc = cache();
  dnnl::stream stream(cc.engine);
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, dnnl::memory(p.pd.src_desc(), cc.engine, const_cast<void*>(a))},
      {DNNL_ARG_WEIGHTS, dnnl::memory(p.pd.weights_desc(), cc.engine, const_cast<void*>(b))},
      {DNNL_ARG_DST, dnnl::memory(p.pd.dst_desc(), cc.engine, c)}};
  if (row_bias)
    args.emplace(DNNL_ARG_BIAS,
                 dnnl::memory(p.pd.bias_desc(), cc.engine, const_cast<void*>(row_bias)));
  p.prim.execute(stream, args);
  stream.wait();
}

}  // namespace

bool onednn_matmul(DType dtype, int64_t batch, int64_t m, int64_t n, int64_t k, StridedMats a,
                   StridedMats b, void* c, int64_t c_batch, int64_t ldc, bool accumulate,
                   const void* row_bias) {
  // Inside a parallel region (a convolution's samples, one per thread) oneDNN runs on one
  // thread but its brgemm kernels split the work for the team size they were made for, and
  // part of the product would be skipped: BLAS takes it, single-threaded there.
  if (omp_in_parallel()) return false;
  const Prepared* p =
      prepare({dtype, batch, m, n, k, a, b, c_batch, ldc, accumulate, row_bias != nullptr});
  if (!p) return false;
  execute(*p, a.data, b.data, c, row_bias);
  return true;
}

}  // namespace coil
