#include "backends/cuda/scan_scatter.h"

#include <algorithm>

#include <coil/error.h>

#include "backends/cuda/cuda_compiler.h"
#include "backends/cuda/cuda_expr.h"
#include "backends/cuda/cuda_prelude.h"
#include "backends/cuda/driver.h"
#include "runtime/copy.h"
#include "runtime/cuda_runtime.h"
#include "runtime/tensor_impl.h"

namespace coil::cuda {

namespace {

constexpr int kBlock = 256;
constexpr int kMaxRank = 8;

unsigned blocks(int64_t n) { return grid_stride_blocks(n, kBlock, 65535); }

}  // namespace

// One thread per line along the dim: a line of a contiguous (outer, len, inner) tensor, summed
// in order, so that the sums are the CPU's (neighbouring threads take neighbouring inner
// positions: their reads and writes are coalesced when inner > 1).
std::string cumsum_kernel_source(DType t) {
  const bool f = is_floating(t);
  const std::string m = memory_type(t), acc = f ? "double" : "u64";
  const std::string widen = f ? "(double)" + from_memory(t, "in[at]") : "(u64)(i64)in[at]";
  const std::string narrow = to_memory(t, f ? "acc" : "(i64)acc");
  return cuda_prelude() + R"(
extern "C" __global__ void coil_cumsum()" +
         m + R"(* __restrict__ out, const )" + m +
         R"(* __restrict__ in, i64 lines, i64 len, i64 inner) {
  for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < lines; t += (i64)gridDim.x * blockDim.x) {
    const i64 base = t / inner * len * inner + t % inner;
    )" + acc +
         R"( acc = 0;
    for (i64 i = 0; i < len; ++i) {
      const i64 at = base + i * inner;
      acc += )" +
         widen + R"(;
      out[at] = )" +
         narrow + R"(;
    }
  }
}
)";
}

void cumsum(const Tensor& x_in, int64_t dim, const Tensor& out) {
  if (out.numel() == 0) return;
  const Tensor x = as_contiguous(x_in);
  int64_t outer = 1, len = x.dim() == 0 ? 1 : x.size(dim), inner = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != dim) (d < dim ? outer : inner) *= x.size(d);
  const int device = out.device().index;
  const DType t = out.dtype();
  void* f = hand_written_kernel(device, std::string("cumsum_") + dtype_short_name(t), "coil_cumsum",
                                [t] { return cumsum_kernel_source(t); });
  void* o = out.impl()->data();
  const void* i = x.impl()->data();
  int64_t lines = outer * inner;
  void* args[] = {&o, &i, &lines, &len, &inner};
  launch(f, "coil_cumsum", device, blocks(lines), kBlock, 0, args);
}

// One thread per index element: its position unravelled over index's sizes gives the offsets
// of the index and src elements and, but for the dim, of the target; the index value places it
// along the dim. 16-bit floats add with a compare-and-swap on the 32-bit word that holds them,
// rounding as the CPU's float accumulation does; bytes likewise (8-bit integers wrapping, bools
// or-ed, as the CPU's accumulate).
std::string scatter_add_kernel_source(DType t, DType index) {
  const std::string m = memory_type(t), ix = memory_type(index);
  std::string add;
  if (t == kFloat16 || t == kBFloat16) {
    const std::string to = t == kFloat16 ? "coil_h2f" : "coil_bf2f";
    const std::string from = t == kFloat16 ? "coil_f2h" : "coil_f2bf";
    add = R"(
__device__ void coil_atomic_add(unsigned short* p, unsigned short v) {
  unsigned* word = (unsigned*)((u64)p & ~(u64)3);
  const unsigned shift = ((u64)p & 2) ? 16 : 0;
  unsigned old = *word, seen;
  do {
    seen = old;
    const unsigned short sum = )" +
          from + "(" + to + "((unsigned short)(seen >> shift)) + " + to +
          R"((v));
    old = atomicCAS(word, seen, (seen & ~(0xffffu << shift)) | ((unsigned)sum << shift));
  } while (seen != old);
}
)";
  } else if (t == kBool || t == kUInt8 || t == kInt8) {
    const std::string sum = t == kBool ? "(cur | (unsigned)v) != 0" : "(cur + (unsigned)v) & 0xffu";
    add = "\n__device__ void coil_atomic_add(" + m + "* p, " + m + R"( v) {
  unsigned* word = (unsigned*)((u64)p & ~(u64)3);
  const unsigned shift = ((u64)p & 3) * 8;
  unsigned old = *word, seen;
  do {
    seen = old;
    const unsigned cur = (seen >> shift) & 0xffu;
    const unsigned sum = )" +
          sum + R"(;
    old = atomicCAS(word, seen, (seen & ~(0xffu << shift)) | (sum << shift));
  } while (seen != old);
}
)";
  } else if (t == kInt64) {
    add = R"(
__device__ void coil_atomic_add(i64* p, i64 v) { atomicAdd((u64*)p, (u64)v); }
)";
  } else {
    add = "\n__device__ void coil_atomic_add(" + m + "* p, " + m + " v) { atomicAdd(p, v); }\n";
  }
  return cuda_prelude() + add + R"(
struct Geometry { i64 n, rank, dim, extent, target_stride, size[8], index[8], src[8], out[8]; };
extern "C" __global__ void coil_scatter_add()" +
         m + "* __restrict__ out, const " + ix + R"(* __restrict__ index, const )" + m +
         R"(* __restrict__ src, Geometry g, i64* error) {
  for (i64 p = (i64)blockIdx.x * blockDim.x + threadIdx.x; p < g.n; p += (i64)gridDim.x * blockDim.x) {
    i64 rest = p, at_index = 0, at_src = 0, at_out = 0;
    for (i64 d = g.rank - 1; d >= 0; --d) {
      const i64 c = rest % g.size[d];
      rest /= g.size[d];
      at_index += c * g.index[d];
      at_src += c * g.src[d];
      at_out += c * g.out[d];
    }
    const i64 j = (i64)index[at_index];
    if ((u64)j >= (u64)g.extent) {
      if (atomicCAS((u64*)&error[0], 0ull, 1ull) == 0ull) error[1] = j;
      continue;
    }
    coil_atomic_add(out + at_out + j * g.target_stride, src[at_src]);
  }
}
)";
}

void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  struct Geometry {
    int64_t n, rank, dim, extent, target_stride, size[kMaxRank], index[kMaxRank], src[kMaxRank],
        out[kMaxRank];
  } g{};
  g.n = index.numel();
  if (g.n == 0) return;
  g.rank = std::max<int64_t>(index.dim(), 1);
  COIL_CHECK(g.rank <= kMaxRank, "scatter_add: tensors of more than ", kMaxRank,
             " dims are not supported on the GPU (index ", shape_str(index.sizes()), ")");
  g.dim = dim;
  g.extent = out.dim() > 0 ? out.size(dim) : 1;
  g.target_stride = out.dim() > 0 ? out.stride(dim) : 0;
  for (int64_t d = 0; d < index.dim(); ++d) {
    g.size[d] = index.size(d);
    g.index[d] = index.stride(d);
    g.src[d] = src.stride(d);
    g.out[d] = d == dim ? 0 : out.stride(d);
  }
  if (index.dim() == 0) g.size[0] = 1;
  const int device = out.device().index;
  const DType t = out.dtype();
  const DType ix = index.dtype();
  void* f = hand_written_kernel(
      device, std::string("scatter_add_") + dtype_short_name(t) + "_" + dtype_short_name(ix),
      "coil_scatter_add", [t, ix] { return scatter_add_kernel_source(t, ix); });
  void* record = allocate(2 * sizeof(int64_t), device);
  zero(record, 2 * sizeof(int64_t), device);
  void* o = out.impl()->data();
  const void* i = index.impl()->data();
  const void* s = src.impl()->data();
  void* args[] = {&o, &i, &s, &g, &record};
  launch(f, "coil_scatter_add", device, blocks(g.n), kBlock, 0, args);
  int64_t error[2] = {0, 0};
  copy(error, kCPU, record, Device(DeviceType::CUDA, device), sizeof error);
  free(record, device);
  COIL_CHECK(error[0] == 0, "scatter_add: index ", error[1], " is out of bounds for dim ", dim,
             " of self ", dtype_name(t), shape_str(out.sizes()), " (size ", g.extent,
             "); indices must lie in [0, ", g.extent, ")");
}

}  // namespace coil::cuda
