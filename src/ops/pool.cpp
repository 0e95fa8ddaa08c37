// 2-D pooling: max_pool2d, avg_pool2d, adaptive_avg_pool2d, their gradients with respect to
// the input, and max_pool2d_double_backward (what a second derivative through max pooling
// needs). Direct loops over each output window, parallel over the N * C planes; shapes and
// window rules follow PyTorch's Pool.h. Each pool visits its windows through one function, so
// the forward (gather from a window) and the backward (scatter into it) agree on the windows.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/linalg_util.h"
#include "runtime/convert.h"

namespace coil::ops {

namespace {

// The input as planes: (planes, h, w) with the batch and channel dims merged.
struct Planes {
  int64_t planes, h, w;
  Shape lead;  // the output's leading dims: (N, C) or (C)
};

Planes pool_planes(const Tensor& x, const char* op) {
  // PyTorch allows an empty batch but not empty channels or spatial dims.
  bool ok = (x.dim() == 3 || x.dim() == 4) && x.size(-1) != 0 && x.size(-2) != 0 && x.size(-3) != 0;
  COIL_CHECK(ok, op, ": expected a non-empty 3-D (C, H, W) or 4-D (N, C, H, W) input, got ",
             describe(x), " (only the batch dim N may be 0)");
  Shape lead(x.sizes().begin(), x.sizes().end() - 2);
  return {numel_of(lead), x.size(-2), x.size(-1), lead};
}

// Window geometry of max/avg pooling along one spatial dim.
struct Window {
  int64_t k, stride, pad, dil, out;
};

// PyTorch's pooling_output_shape: with ceil_mode the last window must still start inside the
// input or the left padding.
int64_t pooled_size(int64_t in, const Window& w, bool ceil_mode) {
  int64_t span = in + 2 * w.pad - w.dil * (w.k - 1) - 1 + (ceil_mode ? w.stride - 1 : 0);
  int64_t out = (span >= 0 ? span / w.stride : -((-span + w.stride - 1) / w.stride)) + 1;
  if (ceil_mode && (out - 1) * w.stride >= in + w.pad) --out;
  return out;
}

struct PoolGeometry {
  Planes p;
  Window y, x;
};

// kernel_size, stride (empty: kernel_size), padding, dilation and ceil_mode, checked as torch.
PoolGeometry pool_geometry(const Tensor& in, const char* op, const Shape& kernel,
                           const Shape& stride, const Shape& padding, const Shape& dilation,
                           bool ceil_mode) {
  PoolGeometry g{pool_planes(in, op), {}, {}};
  auto k = spatial_pair(kernel, op, "kernel_size");
  auto s = stride.empty() ? k : spatial_pair(stride, op, "stride");
  auto p = spatial_pair(padding, op, "padding");
  auto d = spatial_pair(dilation, op, "dilation");
  for (int i = 0; i < 2; ++i) {
    COIL_CHECK(k[i] > 0, op, ": kernel_size must be positive, got ", shape_str(kernel));
    COIL_CHECK(s[i] > 0, op, ": stride must be positive, got ", shape_str(stride));
    COIL_CHECK(d[i] > 0, op, ": dilation must be positive, got ", shape_str(dilation));
    COIL_CHECK(p[i] >= 0 && p[i] <= k[i] / 2, op,
               ": padding must be between 0 and half the kernel size, got padding ",
               shape_str(padding), " for kernel_size ", shape_str(kernel));
  }
  g.y = {k[0], s[0], p[0], d[0], 0};
  g.x = {k[1], s[1], p[1], d[1], 0};
  g.y.out = pooled_size(g.p.h, g.y, ceil_mode);
  g.x.out = pooled_size(g.p.w, g.x, ceil_mode);
  COIL_CHECK(g.y.out >= 1 && g.x.out >= 1, op, ": the input ", describe(in),
             " is too small for kernel_size ", shape_str(kernel), " (with padding ",
             shape_str(padding), " and dilation ", shape_str(dilation), "): the output would be ",
             g.y.out, " x ", g.x.out);
  return g;
}

TensorMeta pooled_meta(const Tensor& x, const Planes& p, int64_t oh, int64_t ow) {
  Shape sizes = p.lead;
  sizes.push_back(oh);
  sizes.push_back(ow);
  return contiguous_meta(x.dtype(), sizes, x.device());
}

// Calls plane(src, dst) for each (contiguous h x w input, oh x ow output) plane pair, in
// parallel when there is enough work.
template <typename T, typename F>
void for_each_plane(const Tensor& x, Tensor& out, const Planes& p, F plane) {
  const T* src = x.data_ptr<T>();
  T* dst = out.data_ptr<T>();
  int64_t in_plane = p.h * p.w, out_plane = out.size(-1) * out.size(-2);
  if (p.planes > 1 && p.planes * (in_plane + out_plane) >= kParallelGrain) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < p.planes; ++i) plane(src + i * in_plane, dst + i * out_plane);
  } else {
    for (int64_t i = 0; i < p.planes; ++i) plane(src + i * in_plane, dst + i * out_plane);
  }
}

// The taps [first, last) of a window starting at `start` that fall inside [0, size).
std::pair<int64_t, int64_t> taps_inside(int64_t start, const Window& w, int64_t size) {
  if (w.dil == 1) {  // most pools: no division, which per window would cost more than its taps
    const int64_t first = std::max<int64_t>(-start, 0);
    return {first, std::max(first, std::min(w.k, size - start))};
  }
  int64_t first = start < 0 ? (-start + w.dil - 1) / w.dil : 0;
  int64_t last = size > start ? std::min(w.k, (size - start + w.dil - 1) / w.dil) : 0;
  return {first, std::max(first, last)};
}

template <typename C>
bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>)
    return std::isnan(v);
  else
    return false;
}

// The windows of max pooling: f(o, y0, x0, i0, i1, j0, j1) for output cell o (row-major), whose
// taps are rows y0 + i * dil (i in [i0, i1)) and columns x0 + j * dil (j in [j0, j1)).
template <typename F>
void max_windows(const PoolGeometry& g, F f) {
  for (int64_t oy = 0; oy < g.y.out; ++oy)
    for (int64_t ox = 0; ox < g.x.out; ++ox) {
      int64_t y0 = oy * g.y.stride - g.y.pad, x0 = ox * g.x.stride - g.x.pad;
      auto [i0, i1] = taps_inside(y0, g.y, g.p.h);
      auto [j0, j1] = taps_inside(x0, g.x, g.p.w);
      f(oy * g.x.out + ox, y0, x0, i0, i1, j0, j1);
    }
}

// The windows of average pooling: f(o, y0, y1, x0, x1, count) for output cell o: the input
// rectangle [y0, y1) x [x0, x1) it sums, and the count it divides by (the window clipped to the
// padded input with count_include_pad, to the input itself otherwise).
template <typename F>
void avg_windows(const PoolGeometry& g, bool include_pad, F f) {
  for (int64_t oy = 0; oy < g.y.out; ++oy)
    for (int64_t ox = 0; ox < g.x.out; ++ox) {
      int64_t y0 = oy * g.y.stride - g.y.pad, x0 = ox * g.x.stride - g.x.pad;
      int64_t y1 = std::min(y0 + g.y.k, g.p.h + g.y.pad);
      int64_t x1 = std::min(x0 + g.x.k, g.p.w + g.x.pad);
      int64_t padded_count = (y1 - y0) * (x1 - x0);
      y0 = std::max<int64_t>(y0, 0);
      x0 = std::max<int64_t>(x0, 0);
      y1 = std::min(y1, g.p.h);
      x1 = std::min(x1, g.p.w);
      f(oy * g.x.out + ox, y0, y1, x0, x1, include_pad ? padded_count : (y1 - y0) * (x1 - x0));
    }
}

// The windows of adaptive average pooling from h x w to oh x ow: f(o, y0, y1, x0, x1), cell o
// covering [floor(o * in / out), ceil((o + 1) * in / out)) along each dim.
template <typename F>
void adaptive_windows(int64_t h, int64_t w, int64_t oh, int64_t ow, F f) {
  auto start = [](int64_t o, int64_t in, int64_t n) { return (o * in) / n; };
  auto end = [](int64_t o, int64_t in, int64_t n) { return ((o + 1) * in + n - 1) / n; };
  for (int64_t oy = 0; oy < oh; ++oy)
    for (int64_t ox = 0; ox < ow; ++ox)
      f(oy * ow + ox, start(oy, h, oh), end(oy, h, oh), start(ox, w, ow), end(ox, w, ow));
}

// The tap each max-pooling window of the plane `src` takes, as max_pool2d_backward routes its
// gradient: f(o, at) for output cell o and the plane offset `at` of the window's first maximum
// (or first NaN), compared in the compute type C. Windows with no tap inside the input are
// skipped. The maximum is found without branches (random data defeats branch prediction); a
// window that holds a NaN is walked again for its first NaN, which is rare.
template <typename C, typename T, typename F>
void max_taps(const PoolGeometry& g, const T* src, F f) {
  max_windows(g, [&](int64_t o, int64_t y0, int64_t x0, int64_t i0, int64_t i1, int64_t j0,
                     int64_t j1) {
    if (i0 == i1 || j0 == j1) return;
    auto tap = [&](int64_t i, int64_t j) { return (y0 + i * g.y.dil) * g.p.w + x0 + j * g.x.dil; };
    int64_t best_at = tap(i0, j0);
    C best = static_cast<C>(src[best_at]);
    bool saw_nan = false;
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t j = j0; j < j1; ++j) {
        const int64_t at = tap(i, j);
        const C v = static_cast<C>(src[at]);
        const bool better = v > best;  // strictly: the first maximum stays
        best = better ? v : best;
        best_at = better ? at : best_at;
        saw_nan |= is_nan(v);
      }
    auto first_nan = [&] {
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j)
          if (is_nan(static_cast<C>(src[tap(i, j)]))) return tap(i, j);
      return best_at;
    };
    f(o, saw_nan ? first_nan() : best_at);
  });
}

// Below every value: padding never wins a maximum.
template <typename C>
C lowest_value() {
  if constexpr (std::numeric_limits<C>::has_infinity) return -std::numeric_limits<C>::infinity();
  return std::numeric_limits<C>::lowest();
}

// The larger of m and v, or v where it is NaN (a NaN met once stays): NaN propagates, as in
// PyTorch. Without branches in a vectorised loop (random data defeats branch prediction); in a
// scalar loop the compiler branches on the NaN test, so there the maximum takes `best < v ? v :
// best` and NaN is tracked aside, for nan_if at the end.
template <typename C>
C max_or_nan(C m, C v) {
  return m < v || is_nan(v) ? v : m;
}
template <typename C>
C nan_if(bool saw_nan, C best) {
  if constexpr (std::numeric_limits<C>::has_quiet_NaN)
    if (saw_nan) return std::numeric_limits<C>::quiet_NaN();
  return best;
}

// Max pooling of one contiguous NCHW plane into its h_out x w_out output. Undilated windows take
// two passes per output row: the maximum down the window's rows for every input column
// (contiguous, vectorised), then across each window's columns of it. Dilated windows are walked
// tap by tap.
template <typename T>
void max_pool_plane(const PoolGeometry& g, const T* src, T* dst) {
  using C = acc_type<T>;
  if (g.y.dil == 1 && g.x.dil == 1) {
    std::vector<C> column(static_cast<size_t>(g.p.w));
    for (int64_t oy = 0; oy < g.y.out; ++oy) {
      const int64_t y0 = oy * g.y.stride - g.y.pad;
      auto [i0, i1] = taps_inside(y0, g.y, g.p.h);
      std::fill(column.begin(), column.end(), lowest_value<C>());
      for (int64_t i = i0; i < i1; ++i) {
        const T* row = src + (y0 + i) * g.p.w;
        for (int64_t x = 0; x < g.p.w; ++x)
          column[x] = max_or_nan<C>(column[x], static_cast<C>(row[x]));
      }
      for (int64_t ox = 0; ox < g.x.out; ++ox) {
        const int64_t x0 = ox * g.x.stride - g.x.pad;
        auto [j0, j1] = taps_inside(x0, g.x, g.p.w);
        C best = lowest_value<C>();
        bool saw_nan = false;
        for (int64_t j = j0; j < j1; ++j) {
          const C v = column[x0 + j];
          best = best < v ? v : best;
          saw_nan |= is_nan(v);
        }
        dst[oy * g.x.out + ox] = convert<T>(nan_if(saw_nan, best));
      }
    }
    return;
  }
  max_windows(
      g, [&](int64_t o, int64_t y0, int64_t x0, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
        C best = lowest_value<C>();
        bool saw_nan = false;
        for (int64_t i = i0; i < i1; ++i) {
          const T* row = src + (y0 + i * g.y.dil) * g.p.w + x0;
          for (int64_t j = j0; j < j1; ++j) {
            const C v = static_cast<C>(row[j * g.x.dil]);
            best = best < v ? v : best;
            saw_nan |= is_nan(v);
          }
        }
        dst[o] = convert<T>(nan_if(saw_nan, best));
      });
}

// Max pooling of a channels-last x ([n, h, w, c] in memory) into a channels-last y: each
// output pixel's window read as rows of c channels, the channels side by side (no copies into
// and out of NCHW order). As the NCHW kernel: padding never wins, NaN propagates.
template <typename T>
void max_pool_nhwc(const PoolGeometry& g, const T* x, T* y, int64_t n, int64_t c) {
  using C = acc_type<T>;
  const int64_t cells = g.y.out * g.x.out;
  const bool parallel = n * cells > 1 && n * cells * c >= kParallelGrain;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t bo = 0; bo < n * cells; ++bo) {
    const int64_t b = bo / cells, oy = bo % cells / g.x.out, ox = bo % g.x.out;
    const int64_t y0 = oy * g.y.stride - g.y.pad, x0 = ox * g.x.stride - g.x.pad;
    auto [i0, i1] = taps_inside(y0, g.y, g.p.h);
    auto [j0, j1] = taps_inside(x0, g.x, g.p.w);
    constexpr int64_t kChunk = 64;  // channels kept in registers across the window
    for (int64_t c0 = 0; c0 < c; c0 += kChunk) {
      const int64_t width = std::min(kChunk, c - c0);
      C best[kChunk];
      std::fill(best, best + width, lowest_value<C>());
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j) {
          const T* px = x + ((b * g.p.h + y0 + i * g.y.dil) * g.p.w + x0 + j * g.x.dil) * c + c0;
          for (int64_t k = 0; k < width; ++k) {
            const C v = static_cast<C>(px[k]);
            best[k] = max_or_nan(best[k], v);
          }
        }
      T* out = y + bo * c + c0;
      for (int64_t k = 0; k < width; ++k) out[k] = convert<T>(best[k]);
    }
  }
}

}  // namespace

// ---- max_pool2d -------------------------------------------------------------------------------

std::vector<TensorMeta> meta_max_pool2d(const Args& a) {
  const Tensor& x = a.tensor(0);
  COIL_CHECK(x.dtype() != kBool, "max_pool2d: not supported for bool tensors (got ", describe(x),
             "); convert to a number dtype first");
  PoolGeometry g =
      pool_geometry(x, "max_pool2d", a.ints(1), a.ints(2), a.ints(3), a.ints(4), a.b(5));
  return one(channels_last_if(pooled_meta(x, g.p, g.y.out, g.x.out), x, x));
}

std::vector<Tensor> eager_max_pool2d(const Args& a, const std::vector<TensorMeta>& out) {
  const Tensor result = empty_from_meta(out[0]);
  const Tensor& in = a.tensor(0);
  // A channels-last input (and so result) is pooled as rows of channels; any other layout plane
  // by plane in NCHW order (and copied into a channels-last result).
  if (result.suggest_memory_format() == MemoryFormat::ChannelsLast &&
      in.suggest_memory_format() == MemoryFormat::ChannelsLast &&
      in.strides() == channels_last_strides(in.sizes())) {
    PoolGeometry g =
        pool_geometry(in, "max_pool2d", a.ints(1), a.ints(2), a.ints(3), a.ints(4), a.b(5));
    dispatch_dtype(in.dtype(), [&]<typename T>() {
      max_pool_nhwc(g, in.data_ptr<T>(), result.data_ptr<T>(), in.size(0), in.size(1));
    });
    return one(result);
  }
  Tensor x = as_contiguous(in);
  PoolGeometry g =
      pool_geometry(x, "max_pool2d", a.ints(1), a.ints(2), a.ints(3), a.ints(4), a.b(5));
  Tensor r = result.is_contiguous() ? result : empty_contiguous(result.sizes(), result.dtype());
  dispatch_dtype(x.dtype(), [&]<typename T>() {
    for_each_plane<T>(x, r, g.p, [&](const T* src, T* dst) { max_pool_plane(g, src, dst); });
  });
  if (!r.is_same(result)) copy_into(result, r);
  return one(result);
}

// ---- avg_pool2d --------------------------------------------------------------------------------

namespace {

// PyTorch's CPU avg_pool2d covers the floating dtypes and int64 (integer division truncates).
void check_avg_dtype(const Tensor& x, const char* op, bool allow_int64) {
  COIL_CHECK(is_floating(x.dtype()) || (allow_int64 && x.dtype() == kInt64), op,
             ": not supported for ", describe(x), " (floating dtypes",
             allow_int64 ? " and int64" : "", " only, as in PyTorch); convert with .to(float32)");
}

}  // namespace

std::vector<TensorMeta> meta_avg_pool2d(const Args& a) {
  const Tensor& x = a.tensor(0);
  check_avg_dtype(x, "avg_pool2d", true);
  PoolGeometry g = pool_geometry(x, "avg_pool2d", a.ints(1), a.ints(2), a.ints(3), {1}, a.b(4));
  return one(pooled_meta(x, g.p, g.y.out, g.x.out));
}

std::vector<Tensor> eager_avg_pool2d(const Args& a, const std::vector<TensorMeta>& out) {
  Tensor x = as_contiguous(a.tensor(0));
  PoolGeometry g = pool_geometry(x, "avg_pool2d", a.ints(1), a.ints(2), a.ints(3), {1}, a.b(4));
  bool include_pad = a.b(5);
  Tensor r = empty_from_meta(out[0]);
  dispatch_dtype(x.dtype(), [&]<typename T>() {
    using C = acc_type<T>;
    if constexpr (std::is_floating_point_v<C> || std::is_same_v<T, int64_t>) {
      for_each_plane<T>(x, r, g.p, [&](const T* src, T* dst) {
        avg_windows(g, include_pad,
                    [&](int64_t o, int64_t y0, int64_t y1, int64_t x0, int64_t x1, int64_t count) {
                      C sum = C(0);
                      for (int64_t iy = y0; iy < y1; ++iy)
                        for (int64_t ix = x0; ix < x1; ++ix)
                          sum += static_cast<C>(src[iy * g.p.w + ix]);
                      dst[o] = count > 0 ? convert<T>(sum / static_cast<C>(count)) : T(0);
                    });
      });
    }
  });
  return one(r);
}

// ---- adaptive_avg_pool2d
// -------------------------------------------------------------------------

std::vector<TensorMeta> meta_adaptive_avg_pool2d(const Args& a) {
  const Tensor& x = a.tensor(0);
  check_avg_dtype(x, "adaptive_avg_pool2d", false);
  Planes p = pool_planes(x, "adaptive_avg_pool2d");
  auto o = spatial_pair(a.ints(1), "adaptive_avg_pool2d", "output_size");
  COIL_CHECK(o[0] >= 0 && o[1] >= 0, "adaptive_avg_pool2d: output_size must be non-negative, got ",
             shape_str(a.ints(1)));
  return one(pooled_meta(x, p, o[0], o[1]));
}

std::vector<Tensor> eager_adaptive_avg_pool2d(const Args& a, const std::vector<TensorMeta>& out) {
  Tensor x = as_contiguous(a.tensor(0));
  Planes p = pool_planes(x, "adaptive_avg_pool2d");
  Tensor r = empty_from_meta(out[0]);
  int64_t oh = r.size(-2), ow = r.size(-1);
  if (r.numel() == 0) return one(r);
  dispatch_floating(x.dtype(), [&]<typename T>() {
    using C = acc_type<T>;
    for_each_plane<T>(x, r, p, [&](const T* src, T* dst) {
      adaptive_windows(p.h, p.w, oh, ow,
                       [&](int64_t o, int64_t y0, int64_t y1, int64_t x0, int64_t x1) {
                         C sum = C(0);
                         for (int64_t iy = y0; iy < y1; ++iy)
                           for (int64_t ix = x0; ix < x1; ++ix)
                             sum += static_cast<C>(src[iy * p.w + ix]);
                         dst[o] = convert<T>(sum / static_cast<C>((y1 - y0) * (x1 - x0)));
                       });
    });
  });
  return one(r);
}

// ---- gradients with respect to the input --------------------------------------------------

namespace {

// The input gradient of a pool: zeros shaped as `self`, into which scatter(g, dst) adds each
// plane's output gradient g (oh x ow) through the pool's windows; float accumulation in the
// compute type, planes in parallel.
template <typename Scatter>
Tensor pool_input_grad(const Tensor& grad_output, const Tensor& self, const Planes& p,
                       const TensorMeta& out, const char* op, Scatter scatter) {
  COIL_CHECK(grad_output.dim() == self.dim() &&
                 std::equal(p.lead.begin(), p.lead.end(), grad_output.sizes().begin()),
             op, ": grad_output ", describe(grad_output), " does not match the input ",
             describe(self));
  // A channels-last result (the input is) is computed plane by plane and copied into its layout.
  const Tensor result = empty_from_meta(out);
  Tensor g = as_contiguous(grad_output),
         r = result.is_contiguous() ? result : empty_contiguous(result.sizes(), result.dtype());
  const int64_t out_plane = g.size(-1) * g.size(-2), in_plane = p.h * p.w;
  dispatch_floating(self.dtype(), [&]<typename T>() {
    using C = acc_type<T>;
    const T* gp = g.data_ptr<T>();
    T* rp = r.data_ptr<T>();
    auto plane = [&](int64_t i) {
      std::vector<C> acc(static_cast<size_t>(in_plane), C(0));
      scatter(gp + i * out_plane, acc.data(), i, C(0));
      for (int64_t k = 0; k < in_plane; ++k) rp[i * in_plane + k] = convert<T>(acc[k]);
    };
    const bool parallel = p.planes > 1 && p.planes * (in_plane + out_plane) >= kParallelGrain;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t i = 0; i < p.planes; ++i) plane(i);
  });
  if (!r.is_same(result)) copy_into(result, r);
  return result;
}

TensorMeta input_grad_meta(const Args& a, const char* op) {
  const Tensor &g = a.tensor(0), &x = a.tensor(1);
  COIL_CHECK(is_floating(x.dtype()) && g.dtype() == x.dtype(), op,
             ": expects floating grad_output and input of one dtype, got ", describe(g), " and ",
             describe(x));
  return layout_like(contiguous_meta(x.dtype(), x.sizes(), x.device()), x);  // x's layout
}

}  // namespace

std::vector<TensorMeta> meta_max_pool2d_backward(const Args& a) {
  pool_geometry(a.tensor(1), "max_pool2d_backward", a.ints(2), a.ints(3), a.ints(4), a.ints(5),
                a.b(6));
  return one(input_grad_meta(a, "max_pool2d_backward"));
}

// Each window's gradient goes to the tap the forward took: the first maximum (or first NaN).
std::vector<Tensor> eager_max_pool2d_backward(const Args& a, const std::vector<TensorMeta>& out) {
  Tensor x = as_contiguous(a.tensor(1));
  PoolGeometry g =
      pool_geometry(x, "max_pool2d_backward", a.ints(2), a.ints(3), a.ints(4), a.ints(5), a.b(6));
  auto scatter = [&]<typename C>(const auto* gp, C* acc, int64_t plane, C) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(gp)>>;
    const T* src = x.data_ptr<T>() + plane * g.p.h * g.p.w;
    max_taps<C>(g, src, [&](int64_t o, int64_t at) { acc[at] += static_cast<C>(gp[o]); });
  };
  return one(pool_input_grad(a.tensor(0), x, g.p, out[0], "max_pool2d_backward", scatter));
}

// ---- max_pool2d_double_backward --------------------------------------------------------------

std::vector<TensorMeta> meta_max_pool2d_double_backward(const Args& a) {
  const Tensor &grad = a.tensor(0), &x = a.tensor(1);
  PoolGeometry g = pool_geometry(x, "max_pool2d_double_backward", a.ints(2), a.ints(3), a.ints(4),
                                 a.ints(5), a.b(6));
  COIL_CHECK(is_floating(x.dtype()) && grad.dtype() == x.dtype() && grad.sizes() == x.sizes(),
             "max_pool2d_double_backward: expects a floating grad shaped as the input, of its "
             "dtype, got ",
             describe(grad), " and ", describe(x));
  return one(pooled_meta(x, g.p, g.y.out, g.x.out));
}

// Each window takes the element of `grad` at the tap max_pool2d_backward sends its gradient to
// (0 for a window with no tap inside the input): the adjoint of max_pool2d_backward.
std::vector<Tensor> eager_max_pool2d_double_backward(const Args& a,
                                                     const std::vector<TensorMeta>& out) {
  Tensor grad = as_contiguous(a.tensor(0)), x = as_contiguous(a.tensor(1));
  PoolGeometry g = pool_geometry(x, "max_pool2d_double_backward", a.ints(2), a.ints(3), a.ints(4),
                                 a.ints(5), a.b(6));
  Tensor r = empty_from_meta(out[0]);
  const int64_t in_plane = g.p.h * g.p.w, out_plane = g.y.out * g.x.out;
  dispatch_floating(x.dtype(), [&]<typename T>() {
    using C = acc_type<T>;
    const T *src = x.data_ptr<T>(), *gp = grad.data_ptr<T>();
    T* dst = r.data_ptr<T>();
    auto plane = [&](int64_t i) {
      T* d = dst + i * out_plane;
      const T* gi = gp + i * in_plane;
      std::fill(d, d + out_plane, T(0));
      max_taps<C>(g, src + i * in_plane, [&](int64_t o, int64_t at) { d[o] = gi[at]; });
    };
    const bool parallel = g.p.planes > 1 && g.p.planes * (in_plane + out_plane) >= kParallelGrain;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t i = 0; i < g.p.planes; ++i) plane(i);
  });
  return one(r);
}

std::vector<TensorMeta> meta_avg_pool2d_backward(const Args& a) {
  pool_geometry(a.tensor(1), "avg_pool2d_backward", a.ints(2), a.ints(3), a.ints(4), {1}, a.b(5));
  return one(input_grad_meta(a, "avg_pool2d_backward"));
}

// Each window's gradient spreads evenly over the taps it summed.
std::vector<Tensor> eager_avg_pool2d_backward(const Args& a, const std::vector<TensorMeta>& out) {
  const Tensor& x = a.tensor(1);
  PoolGeometry g =
      pool_geometry(x, "avg_pool2d_backward", a.ints(2), a.ints(3), a.ints(4), {1}, a.b(5));
  const bool include_pad = a.b(6);
  auto scatter = [&]<typename C>(const auto* gp, C* acc, int64_t, C) {
    avg_windows(g, include_pad,
                [&](int64_t o, int64_t y0, int64_t y1, int64_t x0, int64_t x1, int64_t count) {
                  if (count == 0) return;
                  const C share = static_cast<C>(gp[o]) / static_cast<C>(count);
                  for (int64_t iy = y0; iy < y1; ++iy)
                    for (int64_t ix = x0; ix < x1; ++ix) acc[iy * g.p.w + ix] += share;
                });
  };
  return one(pool_input_grad(a.tensor(0), x, g.p, out[0], "avg_pool2d_backward", scatter));
}

std::vector<TensorMeta> meta_adaptive_avg_pool2d_backward(const Args& a) {
  pool_planes(a.tensor(1), "adaptive_avg_pool2d_backward");
  return one(input_grad_meta(a, "adaptive_avg_pool2d_backward"));
}

std::vector<Tensor> eager_adaptive_avg_pool2d_backward(const Args& a,
                                                       const std::vector<TensorMeta>& out) {
  const Tensor &grad = a.tensor(0), &x = a.tensor(1);
  Planes p = pool_planes(x, "adaptive_avg_pool2d_backward");
  const int64_t oh = grad.size(-2), ow = grad.size(-1);
  auto scatter = [&]<typename C>(const auto* gp, C* acc, int64_t, C) {
    adaptive_windows(
        p.h, p.w, oh, ow, [&](int64_t o, int64_t y0, int64_t y1, int64_t x0, int64_t x1) {
          const C share = static_cast<C>(gp[o]) / static_cast<C>((y1 - y0) * (x1 - x0));
          for (int64_t iy = y0; iy < y1; ++iy)
            for (int64_t ix = x0; ix < x1; ++ix) acc[iy * p.w + ix] += share;
        });
  };
  return one(pool_input_grad(grad, x, p, out[0], "adaptive_avg_pool2d_backward", scatter));
}

}  // namespace coil::ops
