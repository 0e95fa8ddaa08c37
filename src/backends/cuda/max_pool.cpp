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

unsigned blocks(int64_t n) { return grid_stride_blocks(n, kBlock, 1 << 20); }

// The geometry both kernels take, by value (the source's struct has the same layout).
struct Geometry {
  int64_t planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
};

Geometry geometry_of(const Tensor& x, int64_t oh, int64_t ow, const MaxPoolWindow& win) {
  const int64_t h = x.size(-2), w = x.size(-1);
  COIL_CHECK(std::max(h * w, oh * ow) <= std::numeric_limits<int32_t>::max(),
             "max_pool2d: a plane of ", h, " x ", w, " elements (pooled to ", oh, " x ", ow,
             ") is more than the GPU's kernel indexes (2^31 - 1); split the input");
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
// the CPU's taps_inside does. The gradient kernel visits the windows whose span holds an
// element in row-major order, so each element sums its windows' gradients in the CPU's order;
// within a plane it indexes in 32-bit integers (a plane's size is checked to fit).
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

// The windows [o0, o1) along one dim whose span holds position p: window o starts at
// o * s - pad and spans (k - 1) * dil + 1 positions (with a dilation, only every dil-th of
// them is a tap: the caller checks).
__device__ __forceinline__ void coil_windows_holding(int p, int k, int s, int pad, int dil, int out, int& o0, int& o1) {
  const int last = p + pad, first = last - (k - 1) * dil;
  o0 = first <= 0 ? 0 : (first + s - 1) / s;
  o1 = min(out, last / s + 1);
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
  const int h = (int)g.h, w = (int)g.w, oh = (int)g.oh, ow = (int)g.ow;
  const int kh = (int)g.kh, kw = (int)g.kw, sh = (int)g.sh, sw = (int)g.sw;
  const int ph = (int)g.ph, pw = (int)g.pw, dh = (int)g.dh, dw = (int)g.dw;
  for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (i64)gridDim.x * blockDim.x) {
    const i64 plane = e / ((i64)h * w);
    const int at = (int)(e - plane * h * w), y = at / w, x = at % w;
    const int* plane_taps = taps + plane * oh * ow;
    const )" +
         m +
         R"(* plane_gy = gy + plane * oh * ow;
    int oy0, oy1, ox0, ox1;
    coil_windows_holding(y, kh, sh, ph, dh, oh, oy0, oy1);
    coil_windows_holding(x, kw, sw, pw, dw, ow, ox0, ox1);
    )" + acc +
         R"( sum = 0;
    for (int oy = oy0; oy < oy1; ++oy) {
      if (dh > 1 && (y + ph - oy * sh) % dh != 0) continue;
      for (int ox = ox0; ox < ox1; ++ox) {
        if (dw > 1 && (x + pw - ox * sw) % dw != 0) continue;
        const int o = oy * ow + ox;
        if (plane_taps[o] == at) sum += )" +
         from_memory(t, "plane_gy[o]") + R"(;
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
  const Tensor x = as_contiguous(x_in);
  launch_taps(x, &x, &out, nullptr, geometry_of(x, out.size(-2), out.size(-1), w));
}

void max_pool2d_backward(const Tensor& gy_in, const Tensor& x_in, const Tensor& dx,
                         const MaxPoolWindow& w) {
  if (dx.numel() == 0) return;
  const Tensor x = as_contiguous(x_in), gy = as_contiguous(gy_in);
  const Geometry g = geometry_of(x, gy.size(-2), gy.size(-1), w);
  // The taps are 32-bit offsets within a plane, and the gradient's kernel walks a plane's
  // cells and windows in 32-bit integers.
  COIL_CHECK(g.h * g.w < (int64_t{1} << 31) && g.oh * g.ow < (int64_t{1} << 31),
             "max_pool2d's backward on the GPU: planes of ", g.h, " x ", g.w,
             " have 2^31 cells or more; pool smaller planes");
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
  const Tensor x = as_contiguous(x_in), grad = as_contiguous(grad_in);
  launch_taps(x, &grad, &out, nullptr, geometry_of(x, out.size(-2), out.size(-1), w));
}

}  // namespace coil::cuda
