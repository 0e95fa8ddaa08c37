// The runtime's copies and fills on the GPU (runtime/device_kernels.h): one kernel per pair of
// dtypes, whose sizes and strides are arguments, so a new shape never compiles anything; and the
// random draws, one kernel for every distribution. Made with NVRTC the first time they are used
// and kept in the code cache like generated code.
#include "backends/cuda/runtime_kernels.h"

#include <map>
#include <mutex>
#include <tuple>

#include <coil/error.h>

#include "backends/cuda/cuda_compiler.h"
#include "backends/cuda/cuda_expr.h"
#include "backends/cuda/cuda_prelude.h"
#include "backends/cuda/driver.h"
#include "runtime/cuda_runtime.h"
#include "runtime/device_kernels.h"
#include "runtime/loops.h"
#include "runtime/random.h"
#include "runtime/tensor_impl.h"

namespace coil::cuda {

namespace {

constexpr int kMaxRank = 8;
constexpr int kBlock = 256;

// A tensor's geometry as the kernels take it: element count, sizes, and the strides of the
// destination and source (0 along broadcast dims).
struct Geometry {
  int64_t n;
  int64_t rank;
  int64_t size[kMaxRank];
  int64_t dst[kMaxRank];
  int64_t src[kMaxRank];
};

std::string convert(DType to, const std::string& v) {
  if (to == kBool) return "(" + v + " != 0)";
  return "(" + std::string(codegen::compute_type(to)) + ")(" + v + ")";
}

}  // namespace

std::string copy_kernel_source(DType dst, DType src) {
  const std::string d = memory_type(dst), s = memory_type(src);
  return cuda_prelude() + R"(
struct Geometry { i64 n, rank, size[8], dst[8], src[8]; };
__device__ __forceinline__ void coil_offsets(const Geometry& g, i64 i, i64& a, i64& b) {
  if (g.rank == 1) {  // dense or evenly strided: no division
    a = i * g.dst[0];
    b = i * g.src[0];
    return;
  }
  a = 0; b = 0;
  for (i64 d = g.rank - 1; d >= 0; --d) {
    const i64 c = i % g.size[d];
    i /= g.size[d];
    a += c * g.dst[d];
    b += c * g.src[d];
  }
}
extern "C" __global__ void coil_copy()" +
         d + "* __restrict__ dst, const " + s + R"(* __restrict__ src, Geometry g) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < g.n; i += (i64)gridDim.x * blockDim.x) {
    i64 a, b;
    coil_offsets(g, i, a, b);
    dst[a] = )" +
         to_memory(dst, convert(dst, from_memory(src, "src[b]"))) + R"(;
  }
}
// Rows whose elements are contiguous on both sides, 16 bytes at a time: `g` holds the dims
// outside the rows (strides in 16-byte units) and n = rows * chunks, a row's 16-byte chunks.
extern "C" __global__ void coil_copy_rows(uint4* __restrict__ dst, const uint4* __restrict__ src,
                                          Geometry g, i64 chunks) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < g.n; i += (i64)gridDim.x * blockDim.x) {
    const i64 row = i / chunks, c = i - row * chunks;
    i64 a, b;
    coil_offsets(g, row, a, b);
    dst[a + c] = src[b + c];
  }
}
extern "C" __global__ void coil_fill()" +
         d + R"(* __restrict__ dst, double f, i64 k, Geometry g) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < g.n; i += (i64)gridDim.x * blockDim.x) {
    i64 a, b;
    coil_offsets(g, i, a, b);
    dst[a] = )" +
         to_memory(dst, convert(dst, is_floating(dst) ? "f" : "k")) + R"(;
  }
}
)";
}

namespace {

struct Kernels {
  std::shared_ptr<const jit::Module> module;
  void* copy;
  void* copy_rows;
  void* fill;
};

const Kernels& kernels(int device, DType dst, DType src) {
  static std::mutex mutex;
  static auto* loaded = new std::map<std::tuple<int, DType, DType>, Kernels>();
  std::lock_guard<std::mutex> lock(mutex);
  auto key = std::make_tuple(device, dst, src);
  auto it = loaded->find(key);
  if (it != loaded->end()) return it->second;
  NvrtcCompiler compiler(device);
  auto module =
      jit::load(copy_kernel_source(dst, src), compiler,
                std::string("copy_") + dtype_short_name(src) + "_" + dtype_short_name(dst));
  const auto& m = static_cast<const CudaModule&>(*module);
  return loaded
      ->emplace(key, Kernels{module, m.function("coil_copy"), m.function("coil_copy_rows"),
                             m.function("coil_fill")})
      .first->second;
}

Geometry geometry(const Tensor& dst, const Tensor* src, const char* what) {
  Geometry g{};
  g.n = dst.numel();
  g.rank = dst.dim();
  COIL_CHECK(g.rank <= kMaxRank, what, ": tensors of more than ", kMaxRank,
             " dims are not supported on the GPU (got ", shape_str(dst.sizes()), ")");
  Shape src_strides;
  if (src) src_strides = broadcast_strides(*src, dst.sizes());
  // Dims of size 1 dropped and neighbours that step evenly in both tensors merged, so a dense
  // copy has one dim and its kernel divides nothing.
  g.rank = 0;
  for (int64_t d = 0; d < dst.dim(); ++d) {
    const int64_t size = dst.sizes()[d], ds = dst.strides()[d], ss = src ? src_strides[d] : 0;
    if (size == 1) continue;
    const int64_t p = g.rank - 1;
    if (p >= 0 && g.dst[p] == size * ds && g.src[p] == size * ss) {
      g.size[p] *= size;
      g.dst[p] = ds;
      g.src[p] = ss;
      continue;
    }
    g.size[g.rank] = size;
    g.dst[g.rank] = ds;
    g.src[g.rank] = ss;
    ++g.rank;
  }
  return g;
}

unsigned blocks(int64_t n) { return grid_stride_blocks(n, kBlock, 65535); }

// `g`'s copy as rows of 16-byte chunks (coil_copy_rows), where its innermost dim is contiguous
// on both sides, a whole number of chunks long, and every row starts 16-byte aligned: the outer
// dims' offsets are worked out once a chunk rather than once an element. False otherwise.
bool as_rows(Geometry& g, int64_t itemsize, const void* dst, const void* src, int64_t* chunks) {
  const int64_t r = g.rank - 1;
  if (r < 1 || g.dst[r] != 1 || g.src[r] != 1 || (g.size[r] * itemsize) % 16 != 0) return false;
  if (reinterpret_cast<uintptr_t>(dst) % 16 != 0 || reinterpret_cast<uintptr_t>(src) % 16 != 0)
    return false;
  for (int64_t d = 0; d < r; ++d)
    if ((g.dst[d] * itemsize) % 16 != 0 || (g.src[d] * itemsize) % 16 != 0) return false;
  *chunks = g.size[r] * itemsize / 16;
  for (int64_t d = 0; d < r; ++d)
    g.dst[d] = g.dst[d] * itemsize / 16, g.src[d] = g.src[d] * itemsize / 16;
  g.rank = r;
  g.n = g.n / g.size[r] * *chunks;
  return true;
}

void copy_kernel(const Tensor& dst, const Tensor& src) {
  Geometry g = geometry(dst, &src, "copy_");
  if (g.n == 0) return;
  const int device = dst.device().index;
  const bool dense = g.rank == 0 || (g.rank == 1 && g.dst[0] == 1 && g.src[0] == 1);
  if (dst.dtype() == src.dtype() && dense) {
    // Dense to dense: the driver's copy, which moves memory faster than an element loop.
    cuda::copy(dst.impl()->data(), dst.device(), src.impl()->data(), src.device(),
               static_cast<size_t>(g.n) * itemsize(dst.dtype()));
    return;
  }
  const Kernels& k = kernels(device, dst.dtype(), src.dtype());
  void* d = dst.impl()->data();
  void* s = src.impl()->data();
  int64_t chunks = 0;
  if (dst.dtype() == src.dtype() && as_rows(g, itemsize(dst.dtype()), d, s, &chunks)) {
    void* args[] = {&d, &s, &g, &chunks};
    launch(k.copy_rows, "coil_copy_rows", device, blocks(g.n), kBlock, 0, args);
    return;
  }
  void* args[] = {&d, &s, &g};
  launch(k.copy, "coil_copy", device, blocks(g.n), kBlock, 0, args);
}

void fill_kernel(const Tensor& dst, const Scalar& value) {
  Geometry g = geometry(dst, nullptr, "fill_");
  if (g.n == 0) return;
  const int device = dst.device().index;
  const Kernels& k = kernels(device, dst.dtype(), dst.dtype());
  void* d = dst.impl()->data();
  double f = value.to_double();
  int64_t i = is_floating(dst.dtype()) ? 0 : value.to_int();
  void* args[] = {&d, &f, &i, &g};
  launch(k.fill, "coil_fill", device, blocks(g.n), kBlock, 0, args);
}

}  // namespace

// runtime/random.cpp's philox() and draw(), in CUDA: the same words and the same arithmetic
// (NVRTC does not fuse multiplies into adds, coil compiles with --fmad=false), so uniform and
// integer draws equal the CPU's bit for bit.
std::string random_kernel_source() {
  return cuda_prelude() + R"(
__device__ void coil_philox(u64 counter, u64 key, unsigned r[4]) {
  unsigned c0 = (unsigned)counter, c1 = (unsigned)(counter >> 32), c2 = 0, c3 = 0;
  unsigned k0 = (unsigned)key, k1 = (unsigned)(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const u64 p0 = 0xD2511F53ull * c0, p1 = 0xCD9E8D57ull * c2;
    const unsigned n0 = (unsigned)(p1 >> 32) ^ c1 ^ k0, n2 = (unsigned)(p0 >> 32) ^ c3 ^ k1;
    c1 = (unsigned)p1;
    c3 = (unsigned)p0;
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  r[0] = c0; r[1] = c1; r[2] = c2; r[3] = c3;
}
__device__ double coil_unit(unsigned hi, unsigned lo) {
  return (double)((((u64)hi << 32) | lo) >> 11) * 0x1.0p-53;
}
extern "C" __global__ void coil_random(double* __restrict__ out, i64 n, u64 seed, u64 offset,
                                       int kind, double a, double b, i64 low, i64 high,
                                       int below_float) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
    unsigned r[4];
    coil_philox(offset + (u64)i, seed, r);
    double v;
    if (kind == 0) {
      v = a + (b - a) * coil_unit(r[0], r[1]);
      if (below_float && (float)v >= (float)b) v = nextafterf((float)b, -coil_inf_f());
    } else if (kind == 1) {
      const double u1 = 1.0 - coil_unit(r[0], r[1]), u2 = coil_unit(r[2], r[3]);
      v = a + b * sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
    } else {
      const u64 bits = ((u64)r[0] << 32) | r[1];
      v = (double)(low + (i64)(bits % (u64)(high - low)));
    }
    out[i] = v;
  }
}
)";
}

namespace {

void random_kernel(const Tensor& dst, const RandomDraws& d) {
  const int device = dst.device().index;
  void* f = hand_written_kernel(device, "random", "coil_random", random_kernel_source);
  void* out = dst.impl()->data();
  int64_t n = dst.numel();
  uint64_t seed = d.seed, offset = d.offset;
  int kind = static_cast<int>(d.kind), below = d.below_float ? 1 : 0;
  double a = d.a, b = d.b;
  int64_t low = d.low, high = d.high;
  void* args[] = {&out, &n, &seed, &offset, &kind, &a, &b, &low, &high, &below};
  launch(f, "coil_random", device, blocks(n), kBlock, 0, args);
}

[[maybe_unused]] const bool installed =
    (install_device_kernels(DeviceType::CUDA, {copy_kernel, fill_kernel, random_kernel}), true);

}  // namespace

}  // namespace coil::cuda
