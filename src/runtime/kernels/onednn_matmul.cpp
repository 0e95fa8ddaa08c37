#include "runtime/kernels/onednn_matmul.h"

#include <dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <optional>

namespace coil {

namespace {

using Dims = dnnl::memory::dims;

// Creating a primitive costs far more than running a small one: each geometry is made once.
struct Key {
  std::array<int64_t, 14> v;
  bool operator<(const Key& o) const { return v < o.v; }
};

struct Prepared {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
};

struct Cache {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  std::mutex mu;
  std::map<Key, Prepared> primitives;
};

Cache& cache() {
  static Cache c;
  return c;
}

// A batch of `batch` rows x cols matrices. A batch of one still needs a batch stride that
// oneDNN can match to a plain layout: with stride 1 it reads the matrices as "bca", which its
// brgemm kernels decline, and the generic jit gemm it falls back to spends about 20 ms
// generating its kernels on a process's first product.
dnnl::memory::desc desc(int64_t batch, int64_t rows, int64_t cols, int64_t batch_stride,
                        int64_t row_stride, int64_t col_stride) {
  if (batch == 1) batch_stride = std::max(rows * row_stride, cols * col_stride);
  return dnnl::memory::desc(Dims{batch, rows, cols}, dnnl::memory::data_type::f32,
                            Dims{batch_stride, row_stride, col_stride});
}

dnnl::algorithm algorithm(Epilogue e) {
  switch (e) {
    case Epilogue::gelu_erf:
      return dnnl::algorithm::eltwise_gelu_erf;
    case Epilogue::gelu_tanh:
      return dnnl::algorithm::eltwise_gelu_tanh;
    case Epilogue::none:
    case Epilogue::relu:  // oneDNN's gives -0.0 for a negative x (x * slope 0): not fused
      break;
  }
  return dnnl::algorithm::undef;
}

}  // namespace

bool onednn_fuses(Epilogue e) { return algorithm(e) != dnnl::algorithm::undef; }

bool onednn_matmul(int64_t batch, int64_t m, int64_t n, int64_t k, StridedMats a, StridedMats b,
                   float* c, int64_t c_batch, int64_t ldc, bool accumulate, Epilogue epilogue) {
  // Inside a parallel region (a convolution's samples, one per thread) oneDNN runs on one
  // thread but its brgemm kernels split the work for the team size they were made for, and
  // part of the product would be skipped: BLAS takes it, single-threaded there.
  if (omp_in_parallel()) return false;
  if (epilogue != Epilogue::none && !onednn_fuses(epilogue)) return false;
  // oneDNN wants positive strides; a broadcast batch (stride 0) is described as one matrix
  // only when the batch has one.
  for (int64_t s : {a.row, a.col, b.row, b.col})
    if (s <= 0) return false;
  if (batch > 1 && (a.batch <= 0 || b.batch <= 0)) return false;
  Key key{{batch, m, n, k, a.batch, a.row, a.col, b.batch, b.row, b.col, c_batch, ldc,
           accumulate ? 1 : 0, static_cast<int64_t>(epilogue)}};
  Cache& cc = cache();
  Prepared prepared;
  {
    std::lock_guard<std::mutex> lock(cc.mu);
    auto it = cc.primitives.find(key);
    if (it == cc.primitives.end()) {
      // The post-ops run in order on each block of the result in registers: the sum adds
      // what C held (addmm's bias), then the activation.
      dnnl::post_ops ops;
      if (accumulate) ops.append_sum(1.0f);
      if (epilogue != Epilogue::none) ops.append_eltwise(1.0f, algorithm(epilogue), 0.0f, 0.0f);
      dnnl::primitive_attr attr;
      attr.set_post_ops(ops);
      try {
        dnnl::matmul::desc d(desc(batch, m, k, a.batch, a.row, a.col),
                             desc(batch, k, n, b.batch, b.row, b.col),
                             desc(batch, m, n, c_batch, ldc, 1));
        dnnl::matmul::primitive_desc pd(d, attr, cc.engine);
        it = cc.primitives.emplace(key, Prepared{pd, dnnl::matmul(pd)}).first;
      } catch (const dnnl::error&) {
        return false;  // a geometry oneDNN has no kernel for
      }
    }
    prepared = it->second;
  }
  dnnl::stream stream(cc.engine);
  const dnnl::matmul::primitive_desc& pd = prepared.pd;
  dnnl::memory ma(pd.src_desc(), cc.engine, const_cast<float*>(a.data));
  dnnl::memory mb(pd.weights_desc(), cc.engine, const_cast<float*>(b.data));
  dnnl::memory mc(pd.dst_desc(), cc.engine, c);
  prepared.prim.execute(stream, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
  stream.wait();
  return true;
}

namespace {

// How sgemm reads a rows x cols row-major operand: itself ('N', element (i, j) at i * ld + j)
// or the transpose of a stored matrix ('T', element (i, j) at j * ld + i).
struct SgemmLayout {
  char trans;
  int64_t ld;
};

std::optional<SgemmLayout> sgemm_layout(int64_t rows, int64_t cols, const StridedMats& m) {
  if (m.col == 1 && m.row >= std::max<int64_t>(cols, 1)) return SgemmLayout{'N', m.row};
  if (m.row == 1 && m.col >= std::max<int64_t>(rows, 1)) return SgemmLayout{'T', m.col};
  return std::nullopt;
}

}  // namespace

bool onednn_reads_in_place(int64_t rows, int64_t cols, const StridedMats& m) {
  return sgemm_layout(rows, cols, m).has_value();
}

bool onednn_matmul_this_thread(int64_t m, int64_t n, int64_t k, StridedMats a, StridedMats b,
                               float* c, int64_t ldc) {
  std::optional<SgemmLayout> la = sgemm_layout(m, k, a), lb = sgemm_layout(k, n, b);
  return la && lb &&
         dnnl_sgemm(la->trans, lb->trans, m, n, k, 1.0f, a.data, la->ld, b.data, lb->ld, 0.0f, c,
                    ldc) == dnnl_success;
}

}  // namespace coil
