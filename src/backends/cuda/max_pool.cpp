#include "backends/cuda/max_pool.h"

#include <algorithm>
#include <limits>

#include <coil/error.h>

#include "backends/cuda/cuda_compiler.h"
#include "backends/cuda/cuda_expr.h"
#include "backends/cuda/cuda_prelude.h"
#include "backends/cuda/driver.h"
#include "codegen/c_expr.h"
#include "runtime/copy.h"
#include "runtime/tensor_impl.h"

namespace coil::cuda {

namespace {

constexpr int kBlock = 256;

unsigned blocks(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>((n + kBlock - 1) / kBlock, 1 << 20));
}

// The geometry both kernels take, by value (the source's struct has the same layout).
struct Geometry {
  int64_t planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
};

Geometry geometry_of(const Tensor& x, int64_t oh, int64_t ow, const MaxPoolWindow& win) {
  const int64_t h = x.size(-2), w = x.size(-1);
  COIL_CHECK(h * w <= std::numeric_limits<int32_t>::max(), "max_pool2d: a plane of ", h, " x ", w,
             " elements is more than the GPU's kernel indexes (2^31 - 1); split the input");
  return {x.numel() / (h * w),
          h,
          w,
          oh,
          ow,
          win.kernel[0],
          win.kernel[1],
          win.stride[0],
          win.stride[1],
          win.padding[0],
          win.padding[1],
          win.dilation[0],
          win.dilation[1]};
}

Tensor contiguous(const Tensor& t) { return t.is_contiguous() ? t : contiguous_copy(t); }

void* kernel(int device, DType t, const char* name) {
  return hand_written_kernel(device, std::string("max_pool_") + dtype_short_name(t), name,
                             [t] { return max_pool_kernel_source(t); });
}

// Each window's winner (its offset in the plane) into `taps` when it is not null, and the
// element of `pick` (shaped as x) at the winner into `out` when that is not null.
void launch_taps(const Tensor& x, const Tensor* pick, const Tensor* out, void* taps,
                 const Geometry& g) {
  const int device = x.device().index;
  int64_t n = g.planes * g.oh * g.ow;
  const void* xp = x.impl()->data();
  const void* pp = pick ? pick->impl()->data() : nullptr;
  void* op = out ? out->impl()->data() : nullptr;
  Geometry geo = g;
  void* args[] = {&xp, &pp, &op, &taps, &geo, &n};
  launch(kernel(device, x.dtype(), "coil_max_pool_taps"), "coil_max_pool_taps", device, blocks(n),
         kBlock, 0, args);
}

}  // namespace

// Taps are rows y0 + i * dh (i in [i0, i1)) and columns x0 + j * dw, clipped to the input as
// the CPU's taps_inside does. The gradient kernel finds the windows holding an element from
// its position: window oy holds row y at tap i when y + ph - i * dh = oy * sh; descending i
// gives ascending oy, so each element sums its windows' gradients in the CPU's (row-major
// window) order.
std::string max_pool_kernel_source(DType t) {
  const std::string m = memory_type(t), c = codegen::compute_type(t);
  const std::string acc = t == kFloat64 ? "double" : "float";
  return cuda_prelude() + R"(
struct Geometry { i64 planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw; };

__device__ __forceinline__ void coil_taps_inside(i64 start, i64 k, i64 dil, i64 size, i64& first, i64& last) {
  first = start < 0 ? (-start + dil - 1) / dil : 0;
  last = size > start ? min(k, (size - start + dil - 1) / dil) : 0;
  last = max(first, last);
}

extern "C" __global__ void coil_max_pool_taps(const )" +
         m + " * __restrict__ x, const " + m + " * __restrict__ pick, " + m +
         R"(* __restrict__ out, int* __restrict__ taps, Geometry g, i64 n) {
  for (i64 o = (i64)blockIdx.x * blockDim.x + threadIdx.x; o < n; o += (i64)gridDim.x * blockDim.x) {
    const i64 plane = o / (g.oh * g.ow), cell = o % (g.oh * g.ow);
    const i64 y0 = cell / g.ow * g.sh - g.ph, x0 = cell % g.ow * g.sw - g.pw;
    i64 i0, i1, j0, j1;
    coil_taps_inside(y0, g.kh, g.dh, g.h, i0, i1);
    coil_taps_inside(x0, g.kw, g.dw, g.w, j0, j1);
    const )" +
         m +
         R"(* src = x + plane * g.h * g.w;
    i64 best_at = -1;
    )" + c +
         R"( best = 0;
    for (i64 i = i0; i < i1; ++i) {
      for (i64 j = j0; j < j1; ++j) {
        const i64 at = (y0 + i * g.dh) * g.w + x0 + j * g.dw;
        const )" +
         c + " v = " + from_memory(t, "src[at]") + R"(;
        if (best_at < 0 || v > best || (v != v && best == best)) {
          best = v;
          best_at = at;
        }
      }
      if (best != best) break;
    }
    if (taps) taps[o] = (int)best_at;
    if (out) out[o] = best_at < 0 ? ()" +
         m + R"()0 : pick[plane * g.h * g.w + best_at];
  }
}

extern "C" __global__ void coil_max_pool_grad()" +
         m + " * __restrict__ dx, const " + m +
         R"(* __restrict__ gy, const int* __restrict__ taps, Geometry g, i64 n) {
  for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (i64)gridDim.x * blockDim.x) {
    const i64 plane = e / (g.h * g.w), at = e % (g.h * g.w), y = at / g.w, x = at % g.w;
    const i64 first = plane * g.oh * g.ow;
    )" + acc +
         R"( sum = 0;
    for (i64 i = g.kh - 1; i >= 0; --i) {
      const i64 ty = y + g.ph - i * g.dh;
      if (ty < 0 || ty % g.sh != 0 || ty / g.sh >= g.oh) continue;
      for (i64 j = g.kw - 1; j >= 0; --j) {
        const i64 tx = x + g.pw - j * g.dw;
        if (tx < 0 || tx % g.sw != 0 || tx / g.sw >= g.ow) continue;
        const i64 o = first + ty / g.sh * g.ow + tx / g.sw;
        if (taps[o] == (int)at) sum += )" +
         from_memory(t, "gy[o]") + R"(;
      }
    }
    dx[e] = )" +
         to_memory(t, "sum") +
         R"(;
  }
}
)";
}

void max_pool2d(const Tensor& x_in, const Tensor& out, const MaxPoolWindow& w) {
  if (out.numel() == 0) return;
  const Tensor x = contiguous(x_in);
  launch_taps(x, &x, &out, nullptr, geometry_of(x, out.size(-2), out.size(-1), w));
}

void max_pool2d_backward(const Tensor& gy_in, const Tensor& x_in, const Tensor& dx,
                         const MaxPoolWindow& w) {
  if (dx.numel() == 0) return;
  const Tensor x = contiguous(x_in), gy = contiguous(gy_in);
  const Geometry g = geometry_of(x, gy.size(-2), gy.size(-1), w);
  const Tensor taps = empty_contiguous(gy.sizes(), kInt32, x.device());
  launch_taps(x, nullptr, nullptr, taps.impl()->data(), g);
  const int device = x.device().index;
  int64_t n = dx.numel();
  void* d = dx.impl()->data();
  const void* gp = gy.impl()->data();
  const void* tp = taps.impl()->data();
  Geometry geo = g;
  void* args[] = {&d, &gp, &tp, &geo, &n};
  launch(kernel(device, x.dtype(), "coil_max_pool_grad"), "coil_max_pool_grad", device, blocks(n),
         kBlock, 0, args);
}

void max_pool2d_double_backward(const Tensor& grad_in, const Tensor& x_in, const Tensor& out,
                                const MaxPoolWindow& w) {
  if (out.numel() == 0) return;
  const Tensor x = contiguous(x_in), grad = contiguous(grad_in);
  launch_taps(x, &grad, &out, nullptr, geometry_of(x, out.size(-2), out.size(-1), w));
}

}  // namespace coil::cuda
