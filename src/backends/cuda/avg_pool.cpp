#include "backends/cuda/avg_pool.h"

#include <algorithm>

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
  int64_t planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, adaptive, include_pad;
};

// x's planes of h x w pooled to oh x ow (the kernels index in 64 bits: a plane of any size).
Geometry geometry_of(int64_t numel, int64_t h, int64_t w, int64_t oh, int64_t ow,
                     const AvgPoolWindow& win) {
  return {numel / (h * w),
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
          win.adaptive,
          win.count_include_pad};
}

void* kernel(int device, DType t, const char* name) {
  return hand_written_kernel(device, std::string("avg_pool_") + dtype_short_name(t), name,
                             [t] { return avg_pool_kernel_source(t); });
}

}  // namespace

// The window of a cell is the CPU's avg_windows / adaptive_windows: rows [y0, y1) and columns
// [x0, x1) of the input, and the count it divides by. The gradient kernel's element looks at
// the windows around it (those whose span may hold it, one more on each side for the adaptive
// pool's rounding) and takes those that do hold it.
std::string avg_pool_kernel_source(DType t) {
  const std::string m = memory_type(t);
  const bool integer = !is_floating(t);
  const std::string acc = integer ? "i64" : t == kFloat64 ? "double" : "float";
  return cuda_prelude() + R"(
struct Geometry { i64 planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, adaptive, include_pad; };

__device__ __forceinline__ void coil_avg_window(const Geometry& g, i64 oy, i64 ox, i64& y0, i64& y1, i64& x0, i64& x1, i64& count) {
  if (g.adaptive) {
    y0 = oy * g.h / g.oh;
    y1 = ((oy + 1) * g.h + g.oh - 1) / g.oh;
    x0 = ox * g.w / g.ow;
    x1 = ((ox + 1) * g.w + g.ow - 1) / g.ow;
    count = (y1 - y0) * (x1 - x0);
    return;
  }
  y0 = oy * g.sh - g.ph;
  x0 = ox * g.sw - g.pw;
  y1 = min(y0 + g.kh, g.h + g.ph);
  x1 = min(x0 + g.kw, g.w + g.pw);
  const i64 padded = (y1 - y0) * (x1 - x0);
  y0 = max(y0, (i64)0);
  x0 = max(x0, (i64)0);
  y1 = min(y1, g.h);
  x1 = min(x1, g.w);
  count = g.include_pad ? padded : (y1 - y0) * (x1 - x0);
}

// The cells [o0, o1) along one dim whose window may hold position p.
__device__ __forceinline__ void coil_cells_near(i64 p, i64 in, i64 out, i64 k, i64 s, i64 pad, bool adaptive, i64& o0, i64& o1) {
  if (adaptive) {
    o0 = max(p * out / in - 1, (i64)0);
    o1 = min(((p + 1) * out + in - 1) / in + 1, out);
    return;
  }
  const i64 last = p + pad, first = last - (k - 1);
  o0 = first <= 0 ? 0 : (first + s - 1) / s;
  o1 = min(out, last / s + 1);
}

extern "C" __global__ void coil_avg_pool(const )" +
         m + "* __restrict__ x, " + m + R"(* __restrict__ out, Geometry g, i64 n) {
  for (i64 o = (i64)blockIdx.x * blockDim.x + threadIdx.x; o < n; o += (i64)gridDim.x * blockDim.x) {
    const i64 plane = o / (g.oh * g.ow), cell = o % (g.oh * g.ow);
    i64 y0, y1, x0, x1, count;
    coil_avg_window(g, cell / g.ow, cell % g.ow, y0, y1, x0, x1, count);
    const )" +
         m +
         R"(* src = x + plane * g.h * g.w;
    )" + acc +
         R"( sum = 0;
    for (i64 iy = y0; iy < y1; ++iy)
      for (i64 ix = x0; ix < x1; ++ix) sum += ()" +
         acc + ")" + from_memory(t, "src[iy * g.w + ix]") + R"(;
    out[o] = count > 0 ? )" +
         to_memory(t, "sum / (" + acc + ")count") + " : (" + m + R"()0;
  }
}

extern "C" __global__ void coil_avg_pool_grad()" +
         m + "* __restrict__ dx, const " + m + R"(* __restrict__ gy, Geometry g, i64 n) {
  for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (i64)gridDim.x * blockDim.x) {
    const i64 plane = e / (g.h * g.w), at = e % (g.h * g.w), y = at / g.w, x = at % g.w;
    const )" +
         m +
         R"(* plane_gy = gy + plane * g.oh * g.ow;
    i64 oy0, oy1, ox0, ox1;
    coil_cells_near(y, g.h, g.oh, g.kh, g.sh, g.ph, g.adaptive, oy0, oy1);
    coil_cells_near(x, g.w, g.ow, g.kw, g.sw, g.pw, g.adaptive, ox0, ox1);
    )" + acc +
         R"( sum = 0;
    for (i64 oy = oy0; oy < oy1; ++oy)
      for (i64 ox = ox0; ox < ox1; ++ox) {
        i64 y0, y1, x0, x1, count;
        coil_avg_window(g, oy, ox, y0, y1, x0, x1, count);
        if (count == 0 || y < y0 || y >= y1 || x < x0 || x >= x1) continue;
        sum += ()" +
         acc + ")" + from_memory(t, "plane_gy[oy * g.ow + ox]") + " / (" + acc + R"()count;
      }
    dx[e] = )" +
         to_memory(t, "sum") +
         R"(;
  }
}
)";
}

void avg_pool2d(const Tensor& x_in, const Tensor& out, const AvgPoolWindow& w) {
  if (out.numel() == 0) return;
  const Tensor x = as_contiguous(x_in);
  Geometry g = geometry_of(x.numel(), x.size(-2), x.size(-1), out.size(-2), out.size(-1), w);
  const int device = x.device().index;
  int64_t n = out.numel();
  const void* xp = x.impl()->data();
  void* op = out.impl()->data();
  void* args[] = {&xp, &op, &g, &n};
  launch(kernel(device, x.dtype(), "coil_avg_pool"), "coil_avg_pool", device, blocks(n), kBlock, 0,
         args);
}

void avg_pool2d_backward(const Tensor& gy_in, const Tensor& dx, const AvgPoolWindow& w) {
  if (dx.numel() == 0) return;
  if (gy_in.numel() == 0) {
    dx.zero_();
    return;
  }
  const Tensor gy = as_contiguous(gy_in);
  Geometry g = geometry_of(dx.numel(), dx.size(-2), dx.size(-1), gy.size(-2), gy.size(-1), w);
  const int device = dx.device().index;
  int64_t n = dx.numel();
  void* d = dx.impl()->data();
  const void* gp = gy.impl()->data();
  void* args[] = {&d, &gp, &g, &n};
  launch(kernel(device, dx.dtype(), "coil_avg_pool_grad"), "coil_avg_pool_grad", device, blocks(n),
         kBlock, 0, args);
}

}  // namespace coil::cuda
