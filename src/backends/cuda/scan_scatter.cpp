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

// coil_cumsum_chunked without offsets: one thread per line along the dim, a line of a
// contiguous (outer, len, inner) tensor, summed in order in double (or wrapping 64-bit
// integers), so that the sums are the CPU's (neighbouring threads take neighbouring inner
// positions: their reads and writes are coalesced when inner > 1). Few long lines (a sampler's
// cumulative probabilities over a vocabulary) would leave the GPU idle: each line is then cut
// into chunks, a thread each, in three kernels: each chunk's sum (coil_cumsum_chunk_sums), the
// sums before each chunk, a thread per line (coil_cumsum_chunk_offsets), and each chunk's
// running sums from its offset (coil_cumsum_chunked), whose float results match the CPU's but
// for double rounding in the chunks' association.
std::string cumsum_kernel_source(DType t) {
  const bool f = is_floating(t);
  const std::string m = memory_type(t), acc = f ? "double" : "u64";
  const std::string widen = f ? "(double)" + from_memory(t, "in[at]") : "(u64)(i64)in[at]";
  const std::string narrow = to_memory(t, f ? "acc" : "(i64)acc");
  const std::string chunk_loop = R"(
    const i64 line = t / chunks, c = t % chunks;
    const i64 base = line / inner * len * inner + line % inner, end = min(len, (c + 1) * chunk);
    for (i64 i = c * chunk; i < end; ++i) {
      const i64 at = base + i * inner;
      acc += )" + widen;
  const std::string each_chunk =
      "  for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < lines * chunks; t += "
      "(i64)gridDim.x * blockDim.x) {\n";
  return cuda_prelude() + R"(
extern "C" __global__ void coil_cumsum_chunk_sums()" +
         acc + "* __restrict__ sums, const " + m +
         R"(* __restrict__ in, i64 lines, i64 len, i64 inner, i64 chunks, i64 chunk) {
)" + each_chunk +
         "    " + acc + " acc = 0;" + chunk_loop + R"(;
    }
    sums[t] = acc;
  }
}

extern "C" __global__ void coil_cumsum_chunk_offsets()" +
         acc + R"(* __restrict__ sums, i64 lines, i64 chunks) {
  for (i64 line = (i64)blockIdx.x * blockDim.x + threadIdx.x; line < lines; line += (i64)gridDim.x * blockDim.x) {
    )" + acc +
         R"( run = 0;
    for (i64 c = 0; c < chunks; ++c) {
      const )" +
         acc + R"( s = sums[line * chunks + c];
      sums[line * chunks + c] = run;
      run += s;
    }
  }
}

extern "C" __global__ void coil_cumsum_chunked()" +
         m + "* __restrict__ out, const " + m + "* __restrict__ in, const " + acc +
         R"(* __restrict__ offsets, i64 lines, i64 len, i64 inner, i64 chunks, i64 chunk) {
)" + each_chunk +
         "    " + acc + " acc = offsets ? offsets[t] : 0;" + chunk_loop + R"(;
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
  auto kernel = [&](const char* name) {
    return hand_written_kernel(device, std::string("cumsum_") + dtype_short_name(t), name,
                               [t] { return cumsum_kernel_source(t); });
  };
  void* o = out.impl()->data();
  const void* i = x.impl()->data();
  int64_t lines = outer * inner;
  // Chunks enough for kScanThreads threads, of at least kMinChunk elements, at most
  // kMaxChunks a line (the offsets' thread walks them in turn).
  constexpr int64_t kScanThreads = 16384, kMinChunk = 64, kMaxChunks = 2048;
  int64_t chunks =
      std::min({(kScanThreads + lines - 1) / lines, (len + kMinChunk - 1) / kMinChunk, kMaxChunks});
  if (chunks <= 1) {
    const void* none = nullptr;
    int64_t one = 1;
    void* args[] = {&o, &i, &none, &lines, &len, &inner, &one, &len};
    launch(kernel("coil_cumsum_chunked"), "coil_cumsum_chunked", device, blocks(lines), kBlock, 0,
           args);
    return;
  }
  int64_t chunk = (len + chunks - 1) / chunks;
  chunks = (len + chunk - 1) / chunk;
  const Tensor sums =
      empty_contiguous({lines * chunks}, is_floating(t) ? kFloat64 : kInt64, out.device());
  void* s = sums.impl()->data();
  void* sum_args[] = {&s, &i, &lines, &len, &inner, &chunks, &chunk};
  launch(kernel("coil_cumsum_chunk_sums"), "coil_cumsum_chunk_sums", device, blocks(lines * chunks),
         kBlock, 0, sum_args);
  void* offset_args[] = {&s, &lines, &chunks};
  launch(kernel("coil_cumsum_chunk_offsets"), "coil_cumsum_chunk_offsets", device, blocks(lines),
         kBlock, 0, offset_args);
  void* scan_args[] = {&o, &i, &s, &lines, &len, &inner, &chunks, &chunk};
  launch(kernel("coil_cumsum_chunked"), "coil_cumsum_chunked", device, blocks(lines * chunks),
         kBlock, 0, scan_args);
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
  const std::string self = dtype_name(t) + shape_str(out.sizes());
  defer_error_record(device, record, [self, dim, extent = g.extent](int64_t, int64_t value) {
    return "scatter_add: index " + std::to_string(value) + " is out of bounds for dim " +
           std::to_string(dim) + " of self " + self + " (size " + std::to_string(extent) +
           "); indices must lie in [0, " + std::to_string(extent) + ")";
  });
}

}  // namespace coil::cuda
