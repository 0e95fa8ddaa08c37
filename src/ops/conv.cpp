// conv2d as im2col + GEMM: per sample and group, the input patches are unfolded into a
// (C/groups * kh * kw) x (OH * OW) matrix that the group's weights multiply in one BLAS call.
#include <climits>

#include "ops/linalg_util.h"
#include "runtime/kernels/gemm.h"

namespace coil::ops {

std::array<int64_t, 2> spatial_pair(const Shape& v, const char* op, const char* name) {
  COIL_CHECK(v.size() == 1 || v.size() == 2, op, ": ", name,
             " must be one int or two (height, width), got ", shape_str(v));
  return {v[0], v.back()};
}

namespace {

// Everything about one conv2d call that the meta function checks and the kernel needs.
struct ConvGeometry {
  int64_t n, c, h, w;  // input (n = 1 for an unbatched input)
  int64_t o, kh, kw;   // weight
  int64_t oh, ow;      // output spatial size
  int64_t groups;
  std::array<int64_t, 2> stride, pad, dil;
  bool batched;
};

ConvGeometry conv_geometry(const Args& a) {
  const Tensor &x = a.tensor(0), &w = a.tensor(1);
  Tensor bias = a.opt_tensor(2);
  COIL_CHECK(x.dim() == 3 || x.dim() == 4,
             "conv2d: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got ", describe(x));
  COIL_CHECK(w.dim() == 4,
             "conv2d: expected a 4-D weight (out_channels, in_channels/groups, kH, "
             "kW), got ",
             describe(w));
  COIL_CHECK(is_floating(x.dtype()), "conv2d: only floating-point inputs are supported (got ",
             describe(x), "), as in PyTorch on CPU; convert with .to(float32)");
  COIL_CHECK(x.dtype() == w.dtype(), "conv2d: the input ", describe(x), " and the weight ",
             describe(w), " must have the same dtype; convert one with .to(...)");
  ConvGeometry g{};
  g.batched = x.dim() == 4;
  int64_t lead = g.batched ? 1 : 0;
  g.n = g.batched ? x.size(0) : 1;
  g.c = x.size(lead);
  g.h = x.size(lead + 1);
  g.w = x.size(lead + 2);
  g.o = w.size(0);
  g.kh = w.size(2);
  g.kw = w.size(3);
  g.groups = a.i64(6);
  g.stride = spatial_pair(a.ints(3), "conv2d", "stride");
  g.pad = spatial_pair(a.ints(4), "conv2d", "padding");
  g.dil = spatial_pair(a.ints(5), "conv2d", "dilation");
  for (int i = 0; i < 2; ++i) {
    COIL_CHECK(g.stride[i] > 0, "conv2d: stride must be positive, got ", shape_str(a.ints(3)));
    COIL_CHECK(g.pad[i] >= 0, "conv2d: padding must be non-negative, got ", shape_str(a.ints(4)));
    COIL_CHECK(g.dil[i] > 0, "conv2d: dilation must be positive, got ", shape_str(a.ints(5)));
  }
  COIL_CHECK(g.groups > 0, "conv2d: groups must be positive, got ", g.groups);
  COIL_CHECK(g.kh > 0 && g.kw > 0, "conv2d: the weight ", describe(w), " has an empty kernel");
  COIL_CHECK(g.o % g.groups == 0, "conv2d: with groups=", g.groups, " the weight's out_channels ",
             g.o, " must be divisible by groups (weight ", describe(w), ")");
  COIL_CHECK(w.size(1) * g.groups == g.c, "conv2d: with groups=", g.groups, " the weight ",
             describe(w), " expects an input with ", w.size(1) * g.groups,
             " channels, but the input ", describe(x), " has ", g.c);
  int64_t ekh = g.dil[0] * (g.kh - 1) + 1, ekw = g.dil[1] * (g.kw - 1) + 1;
  int64_t ph = g.h + 2 * g.pad[0], pw = g.w + 2 * g.pad[1];
  COIL_CHECK(ekh <= ph && ekw <= pw, "conv2d: the padded input size per channel (", ph, " x ", pw,
             ") of ", describe(x), " is smaller than the dilated kernel (", ekh, " x ", ekw,
             "); pad the input or use a smaller kernel or dilation");
  g.oh = (ph - ekh) / g.stride[0] + 1;
  g.ow = (pw - ekw) / g.stride[1] + 1;
  if (bias.defined()) {
    COIL_CHECK(bias.dim() == 1 && bias.size(0) == g.o, "conv2d: the bias must be 1-D with ", g.o,
               " elements (one per output channel), got ", describe(bias));
    COIL_CHECK(bias.dtype() == x.dtype(), "conv2d: the bias ", describe(bias),
               " must have the input's dtype ", dtype_name(x.dtype()));
  }
  return g;
}

// Unfolds the `cg` channels at `src` (each h x w, contiguous) into `col`, a
// (cg * kh * kw) x (oh * ow) row-major matrix; taps in the padding read as 0.
template <typename T>
void im2col(const T* src, int64_t cg, const ConvGeometry& g, T* col) {
  int64_t ohw = g.oh * g.ow;
  for (int64_t c = 0; c < cg; ++c) {
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        T* dst = col + ((c * g.kh + i) * g.kw + j) * ohw;
        for (int64_t y = 0; y < g.oh; ++y) {
          int64_t iy = y * g.stride[0] - g.pad[0] + i * g.dil[0];
          T* row = dst + y * g.ow;
          if (iy < 0 || iy >= g.h) {
            std::fill(row, row + g.ow, T(0));
            continue;
          }
          const T* in = src + (c * g.h + iy) * g.w;
          for (int64_t x = 0; x < g.ow; ++x) {
            int64_t ix = x * g.stride[1] - g.pad[1] + j * g.dil[1];
            row[x] = ix >= 0 && ix < g.w ? in[ix] : T(0);
          }
        }
      }
    }
  }
}

// out (n, o, oh, ow), contiguous, of T = float or double; x and w contiguous of T. out holds
// the bias already when `has_bias`, and the products accumulate onto it.
template <typename T>
void conv_gemm(const T* x, const T* w, T* out, const ConvGeometry& g, bool has_bias) {
  int64_t cg = g.c / g.groups, og = g.o / g.groups;
  int64_t kdim = cg * g.kh * g.kw, ohw = g.oh * g.ow;
  // A 1x1 kernel with unit stride and no padding reads the input as it is.
  bool direct = g.kh == 1 && g.kw == 1 && g.stride == std::array<int64_t, 2>{1, 1} &&
                g.pad == std::array<int64_t, 2>{0, 0};
  for (int64_t v : {kdim, ohw, og})
    COIL_CHECK(v <= INT_MAX, "conv2d: a GEMM dimension of ", v,
               " exceeds the 32-bit BLAS limit; split the input");
  auto sample = [&](int64_t s, std::vector<T>& col) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const T* src = x + (s * g.c + grp * cg) * g.h * g.w;
      if (!direct) im2col(src, cg, g, col.data());
      MatRef wm{w + grp * og * kdim, kdim, 1};
      MatRef cm{direct ? src : col.data(), ohw, 1};
      gemm(dtype_of<T>, og, ohw, kdim, wm, cm, out + (s * g.o + grp * og) * ohw, ohw, has_bias);
    }
  };
  size_t col_size = direct ? 0 : static_cast<size_t>(kdim * ohw);
  // Below ~64K multiply-adds in all, a parallel region costs more than it saves.
  if (g.n > 1 && g.n * g.o * ohw * kdim / g.groups >= (int64_t{1} << 16)) {
    // One sample per thread (each with its own unfold buffer); BLAS runs single-threaded inside.
#pragma omp parallel
    {
      std::vector<T> col(col_size);
#pragma omp for schedule(static)
      for (int64_t s = 0; s < g.n; ++s) sample(s, col);
    }
  } else {
    std::vector<T> col(col_size);
    for (int64_t s = 0; s < g.n; ++s) sample(s, col);
  }
}

// A contiguous copy of t in `dtype`, or t itself when it already is one.
Tensor contiguous_as(const Tensor& t, DType dtype) {
  if (t.dtype() != dtype) return to_dtype_copy(t, dtype);
  return t.is_contiguous() ? t : contiguous_copy(t);
}

}  // namespace

std::vector<TensorMeta> meta_conv2d(const Args& a) {
  ConvGeometry g = conv_geometry(a);
  Shape sizes{g.o, g.oh, g.ow};
  if (g.batched) sizes.insert(sizes.begin(), g.n);
  return one(contiguous_meta(a.tensor(0).dtype(), sizes, common_device(a, {0, 1, 2}, "conv2d")));
}

std::vector<Tensor> eager_conv2d(const Args& a, const std::vector<TensorMeta>& out) {
  ConvGeometry g = conv_geometry(a);
  Tensor bias = a.opt_tensor(2);
  Tensor r = empty_from_meta(out[0]);
  if (r.numel() == 0) return one(r);
  // float16/bfloat16 compute in float32, as PyTorch's CPU convolution does.
  DType compute = out[0].dtype == kFloat64 ? kFloat64 : kFloat32;
  Tensor x = contiguous_as(a.tensor(0), compute), w = contiguous_as(a.tensor(1), compute);
  Tensor acc = compute == r.dtype() ? r : empty_contiguous(r.sizes(), compute);
  if (bias.defined()) {
    // Each output plane starts at its channel's bias.
    Tensor planes =
        alias_with(acc, {g.n, g.o, g.oh * g.ow}, {g.o * g.oh * g.ow, g.oh * g.ow, 1}, 0);
    copy_into(planes, alias_with(bias, {g.o, 1}, {bias.stride(0), 0}, bias.storage_offset()));
  }
  dispatch_floating(compute, [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
      conv_gemm<T>(x.data_ptr<T>(), w.data_ptr<T>(), acc.data_ptr<T>(), g, bias.defined());
  });
  if (!acc.is_same(r)) copy_into(r, acc);
  return one(r);
}

}  // namespace coil::ops
