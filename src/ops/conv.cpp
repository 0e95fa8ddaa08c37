// conv2d and its backward ops through oneDNN's convolution primitives
// (runtime/kernels/onednn_conv.h): float32, and the 16-bit floats in their own dtype where the
// CPU has kernels for them, else in float32 copies (as PyTorch's CPU convolutions compute them).
// Where oneDNN has no kernel, and in float64, as im2col + GEMM:
// per sample and group, the input patches are unfolded into a (C/groups * kh * kw) x (OH * OW)
// matrix that the group's weights multiply in one BLAS call.
// Its backward ops are the same products transposed: the input's gradient folds the product of
// the weights' transpose and the output gradient back (col2im), the weight's multiplies the
// output gradient by the unfolded input's transpose.
#include <climits>

#include "ops/linalg_util.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/onednn_conv.h"

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

// A convolution's arguments, checked: the input and the weight at `first` and `first + 1`
// (conv2d's, or its backward ops' after the gradient), then stride, padding, dilation and
// groups at 3-6 in both; conv2d's bias at 2. `op` names the op in errors.
ConvGeometry conv_geometry(const Args& a, size_t first, const char* op) {
  const Tensor &x = a.tensor(first), &w = a.tensor(first + 1);
  Tensor bias = first == 0 ? a.opt_tensor(2) : Tensor();
  COIL_CHECK(x.dim() == 3 || x.dim() == 4, op,
             ": expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got ", describe(x));
  COIL_CHECK(w.dim() == 4, op,
             ": expected a 4-D weight (out_channels, in_channels/groups, kH, "
             "kW), got ",
             describe(w));
  COIL_CHECK(is_floating(x.dtype()), op, ": only floating-point inputs are supported (got ",
             describe(x), "), as in PyTorch on CPU; convert with .to(float32)");
  COIL_CHECK(x.dtype() == w.dtype(), op, ": the input ", describe(x), " and the weight ",
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
  g.stride = spatial_pair(a.ints(3), op, "stride");
  g.pad = spatial_pair(a.ints(4), op, "padding");
  g.dil = spatial_pair(a.ints(5), op, "dilation");
  for (int i = 0; i < 2; ++i) {
    COIL_CHECK(g.stride[i] > 0, op, ": stride must be positive, got ", shape_str(a.ints(3)));
    COIL_CHECK(g.pad[i] >= 0, op, ": padding must be non-negative, got ", shape_str(a.ints(4)));
    COIL_CHECK(g.dil[i] > 0, op, ": dilation must be positive, got ", shape_str(a.ints(5)));
  }
  COIL_CHECK(g.groups > 0, op, ": groups must be positive, got ", g.groups);
  COIL_CHECK(g.kh > 0 && g.kw > 0, op, ": the weight ", describe(w), " has an empty kernel");
  COIL_CHECK(g.o % g.groups == 0, op, ": with groups=", g.groups, " the weight's out_channels ",
             g.o, " must be divisible by groups (weight ", describe(w), ")");
  COIL_CHECK(w.size(1) * g.groups == g.c, op, ": with groups=", g.groups, " the weight ",
             describe(w), " expects an input with ", w.size(1) * g.groups,
             " channels, but the input ", describe(x), " has ", g.c);
  int64_t ekh = g.dil[0] * (g.kh - 1) + 1, ekw = g.dil[1] * (g.kw - 1) + 1;
  int64_t ph = g.h + 2 * g.pad[0], pw = g.w + 2 * g.pad[1];
  COIL_CHECK(ekh <= ph && ekw <= pw, op, ": the padded input size per channel (", ph, " x ", pw,
             ") of ", describe(x), " is smaller than the dilated kernel (", ekh, " x ", ekw,
             "); pad the input or use a smaller kernel or dilation");
  g.oh = (ph - ekh) / g.stride[0] + 1;
  g.ow = (pw - ekw) / g.stride[1] + 1;
  if (bias.defined()) {
    COIL_CHECK(bias.dim() == 1 && bias.size(0) == g.o, op, ": the bias must be 1-D with ", g.o,
               " elements (one per output channel), got ", describe(bias));
    COIL_CHECK(bias.dtype() == x.dtype(), op, ": the bias ", describe(bias),
               " must have the input's dtype ", dtype_name(x.dtype()));
  }
  return g;
}

// A 1x1 kernel with unit stride and no padding reads the input as it is: no unfolding.
bool unfolds_to_itself(const ConvGeometry& g) {
  return g.kh == 1 && g.kw == 1 && g.stride == std::array<int64_t, 2>{1, 1} &&
         g.pad == std::array<int64_t, 2>{0, 0};
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

// Runs sample(s, col) for every sample s, with `col` an unfold buffer of the sample's size (none
// for a kernel that unfolds to itself): one sample per thread (each with its own buffer; BLAS
// runs single-threaded inside), or one after another below ~64K multiply-adds in all, where a
// parallel region costs more than it saves.
template <typename T, typename Sample>
void for_each_sample(const ConvGeometry& g, Sample sample) {
  const int64_t kdim = g.c / g.groups * g.kh * g.kw, ohw = g.oh * g.ow;
  const size_t col_size = unfolds_to_itself(g) ? 0 : static_cast<size_t>(kdim * ohw);
  if (g.n > 1 && g.n * g.o * ohw * kdim / g.groups >= (int64_t{1} << 16)) {
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

// out (n, o, oh, ow), contiguous, of T = float or double; x and w contiguous of T. out holds
// the bias already when `has_bias`, and the products accumulate onto it.
template <typename T>
void conv_gemm(const T* x, const T* w, T* out, const ConvGeometry& g, bool has_bias) {
  int64_t cg = g.c / g.groups, og = g.o / g.groups;
  int64_t kdim = cg * g.kh * g.kw, ohw = g.oh * g.ow;
  const bool direct = unfolds_to_itself(g);
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
  for_each_sample<T>(g, sample);
}

// im2col's adjoint: adds each entry of `col` into the input element it was read from (taps in
// the padding are dropped).
template <typename T>
void col2im(const T* col, int64_t cg, const ConvGeometry& g, T* dst) {
  int64_t ohw = g.oh * g.ow;
  for (int64_t c = 0; c < cg; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        const T* src = col + ((c * g.kh + i) * g.kw + j) * ohw;
        for (int64_t y = 0; y < g.oh; ++y) {
          int64_t iy = y * g.stride[0] - g.pad[0] + i * g.dil[0];
          if (iy < 0 || iy >= g.h) continue;
          T* row = dst + (c * g.h + iy) * g.w;
          for (int64_t x = 0; x < g.ow; ++x) {
            int64_t ix = x * g.stride[1] - g.pad[1] + j * g.dil[1];
            if (ix >= 0 && ix < g.w) row[ix] += src[y * g.ow + x];
          }
        }
      }
}

// dx (n, c, h, w), zeroed, += the gradient through conv_gemm: per sample and group, the
// weights' transpose times the output gradient gives the unfolded gradient, folded back.
template <typename T>
void conv_input_grad(const T* gy, const T* w, T* dx, const ConvGeometry& g) {
  int64_t cg = g.c / g.groups, og = g.o / g.groups;
  int64_t kdim = cg * g.kh * g.kw, ohw = g.oh * g.ow;
  const bool direct = unfolds_to_itself(g);
  auto sample = [&](int64_t s, std::vector<T>& col) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      T* dst = dx + (s * g.c + grp * cg) * g.h * g.w;
      MatRef wt{w + grp * og * kdim, 1, kdim};
      MatRef gm{gy + (s * g.o + grp * og) * ohw, ohw, 1};
      gemm(dtype_of<T>, kdim, ohw, og, wt, gm, direct ? dst : col.data(), ohw);
      if (!direct) col2im(col.data(), cg, g, dst);
    }
  };
  for_each_sample<T>(g, sample);
}

// dw (o, c/groups, kh, kw) = the sum over samples of the output gradient times the unfolded
// input's transpose, per group (samples one after another, BLAS parallel inside).
template <typename T>
void conv_weight_grad(const T* gy, const T* x, T* dw, const ConvGeometry& g) {
  int64_t cg = g.c / g.groups, og = g.o / g.groups;
  int64_t kdim = cg * g.kh * g.kw, ohw = g.oh * g.ow;
  const bool direct = unfolds_to_itself(g);
  std::vector<T> col(direct ? 0 : static_cast<size_t>(kdim * ohw));
  for (int64_t s = 0; s < g.n; ++s)
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const T* src = x + (s * g.c + grp * cg) * g.h * g.w;
      if (!direct) im2col(src, cg, g, col.data());
      MatRef gm{gy + (s * g.o + grp * og) * ohw, ohw, 1};
      MatRef ct{direct ? src : col.data(), 1, ohw};
      gemm(dtype_of<T>, og, kdim, ohw, gm, ct, dw + grp * og * kdim, kdim, s > 0);
    }
}

ConvShape shape_of(const ConvGeometry& g, DType dtype) {
  ConvShape s{g.n, g.c, g.h, g.w, g.o, g.kh, g.kw, g.oh, g.ow, g.groups, g.stride, g.pad, g.dil};
  s.dtype = dtype;
  return s;
}

// The dtypes oneDNN is asked to compute a convolution of `dtype` in, the first that it has
// kernels for taken: a 16-bit dtype itself (accumulating in float32), then float32 copies;
// none for float64.
std::vector<DType> onednn_dtypes(DType dtype) {
  if (dtype == kFloat64) return {};
  if (dtype == kFloat32) return {kFloat32};
  return {dtype, kFloat32};
}

// A contiguous copy of t in `dtype`, or t itself when it already is one.
Tensor contiguous_as(const Tensor& t, DType dtype) {
  if (t.dtype() != dtype) return to_dtype_copy(t, dtype);
  return t.is_contiguous() ? t : contiguous_copy(t);
}

// A channels-last copy of the 4-D t in `dtype`, or t itself when it already is one.
Tensor channels_last_as(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype && t.impl()->meta.is_channels_last()) return t;
  Tensor r = empty_from_meta({dtype, t.sizes(), channels_last_strides(t.sizes()), 0, t.device()});
  copy_into(r, t);
  return r;
}

}  // namespace

std::vector<TensorMeta> meta_conv2d(const Args& a) {
  ConvGeometry g = conv_geometry(a, 0, "conv2d");
  Shape sizes{g.o, g.oh, g.ow};
  if (g.batched) sizes.insert(sizes.begin(), g.n);
  // Channels-last when the input or the weight is, as torch's convolutions decide.
  return one(channels_last_if(
      contiguous_meta(a.tensor(0).dtype(), sizes, common_device(a, {0, 1, 2}, "conv2d")),
      a.tensor(0), a.tensor(1)));
}

std::vector<Tensor> eager_conv2d(const Args& a, const std::vector<TensorMeta>& out) {
  ConvGeometry g = conv_geometry(a, 0, "conv2d");
  Tensor bias = a.opt_tensor(2);
  Tensor r = empty_from_meta(out[0]);
  if (r.numel() == 0) return one(r);
  for (DType dtype : onednn_dtypes(r.dtype())) {
    Tensor b = bias.defined() ? contiguous_as(bias, dtype) : Tensor();
    // A channels-last result (conv2d_meta: the input or the weight is) from NHWC activations,
    // and a channels-last weight read as it is (a model converted to channels-last).
    ConvShape s = shape_of(g, dtype);
    s.channels_last = r.impl()->meta.is_channels_last();
    s.weights_channels_last = g.groups == 1 && a.tensor(1).dtype() == dtype &&
                              a.tensor(1).impl()->meta.is_channels_last();
    Tensor x =
        s.channels_last ? channels_last_as(a.tensor(0), dtype) : contiguous_as(a.tensor(0), dtype);
    Tensor w = s.weights_channels_last ? a.tensor(1) : contiguous_as(a.tensor(1), dtype);
    Tensor y =
        r.dtype() == dtype ? r : empty_from_meta({dtype, r.sizes(), r.strides(), 0, r.device()});
    // The weight's own memory (not a copy made here): oneDNN may keep its reordered form.
    const Storage& ws = *a.tensor(1).impl()->storage;
    const WeightVersion wv =
        w.impl()->storage.get() == &ws ? WeightVersion{ws.id, ws.version} : WeightVersion{};
    if (onednn_conv2d(s, x.data_ptr(), w.data_ptr(), b.defined() ? b.data_ptr() : nullptr,
                      y.data_ptr(), wv)) {
      if (!y.is_same(r)) copy_into(r, y);
      return one(r);
    }
  }
  // float16/bfloat16 compute in float32, as PyTorch's CPU convolution does.
  DType compute = r.dtype() == kFloat64 ? kFloat64 : kFloat32;
  Tensor x = contiguous_as(a.tensor(0), compute), w = contiguous_as(a.tensor(1), compute);
  Tensor acc = compute == r.dtype() && r.is_contiguous() ? r : empty_contiguous(r.sizes(), compute);
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

namespace {

// conv2d's backward ops: `grad_output` must be what conv2d gives for self and weight.
ConvGeometry backward_geometry(const Args& a, const char* op) {
  ConvGeometry g = conv_geometry(a, 1, op);
  const Tensor& gy = a.tensor(0);
  COIL_CHECK(g.batched, op, ": expected a 4-D (N, C, H, W) input, got ", describe(a.tensor(1)));
  COIL_CHECK(gy.sizes() == Shape({g.n, g.o, g.oh, g.ow}), op, ": the gradient ", describe(gy),
             " does not have conv2d's output sizes [", g.n, ", ", g.o, ", ", g.oh, ", ", g.ow,
             "] for the input ", describe(a.tensor(1)), " and the weight ", describe(a.tensor(2)));
  COIL_CHECK(gy.dtype() == a.tensor(1).dtype(), op, ": the gradient ", describe(gy),
             " must have the input's dtype ", dtype_name(a.tensor(1).dtype()));
  return g;
}

// A backward op's result. `onednn(s, gy, x, w, out)` runs oneDNN's pass where it has one (in
// onednn_dtypes' order; true when it did), else `own(...)`, coil's kernel over NCHW tensors in
// float32 or float64. With a channels-last gradient or input (a channels-last model's
// training), oneDNN reads and writes the activations NHWC and the weight OHWI as they are.
template <typename OneDnn, typename Own>
std::vector<Tensor> conv_backward(const Args& a, const TensorMeta& out, const char* op,
                                  bool weight_grad, OneDnn onednn, Own own) {
  ConvGeometry g = backward_geometry(a, op);
  Tensor r = empty_from_meta(out);
  if (r.numel() == 0 || g.n == 0) {
    fill(r, 0);
    return one(r);
  }
  for (DType dtype : onednn_dtypes(r.dtype())) {
    ConvShape s = shape_of(g, dtype);
    s.channels_last =
        a.tensor(0).impl()->meta.is_channels_last() || a.tensor(1).impl()->meta.is_channels_last();
    s.weights_channels_last = g.groups == 1 && a.tensor(2).dtype() == dtype &&
                              a.tensor(2).impl()->meta.is_channels_last();
    auto activation = [&](const Tensor& t) {
      return s.channels_last ? channels_last_as(t, dtype) : contiguous_as(t, dtype);
    };
    Tensor gy = activation(a.tensor(0)), x = activation(a.tensor(1));
    Tensor w = s.weights_channels_last ? a.tensor(2) : contiguous_as(a.tensor(2), dtype);
    // The result in the layout oneDNN writes: the activations' for dx, the weight's for dw.
    const bool nhwc = weight_grad ? s.weights_channels_last : s.channels_last;
    const Shape& sizes = r.sizes();
    Tensor acc =
        r.impl()->meta.is_channels_last() == nhwc && r.dtype() == dtype
            ? r
            : empty_from_meta({dtype, sizes,
                               nhwc ? channels_last_strides(sizes) : contiguous_strides(sizes), 0,
                               r.device()});
    if (onednn(s, gy.data_ptr(), x.data_ptr(), w.data_ptr(), acc.data_ptr())) {
      if (!acc.is_same(r)) copy_into(r, acc);
      return one(r);
    }
  }
  DType compute = r.dtype() == kFloat64 ? kFloat64 : kFloat32;
  Tensor acc = compute == r.dtype() && r.is_contiguous() ? r : empty_contiguous(r.sizes(), compute);
  fill(acc, 0);
  Tensor gy = contiguous_as(a.tensor(0), compute), x = contiguous_as(a.tensor(1), compute),
         w = contiguous_as(a.tensor(2), compute);
  dispatch_floating(compute, [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
      own(gy.data_ptr<T>(), x.data_ptr<T>(), w.data_ptr<T>(), acc.data_ptr<T>(), g);
  });
  if (!acc.is_same(r)) copy_into(r, acc);
  return one(r);
}

}  // namespace

// dx is channels-last when the gradient or the input is (on the CPU), as conv2d's result.
std::vector<TensorMeta> meta_conv2d_input_backward(const Args& a) {
  backward_geometry(a, "conv2d_input_backward");
  return one(channels_last_if(contiguous_meta(a.tensor(1).dtype(), a.tensor(1).sizes(),
                                              common_device(a, {0, 1, 2}, "conv2d_input_backward")),
                              a.tensor(0), a.tensor(1)));
}

std::vector<Tensor> eager_conv2d_input_backward(const Args& a, const std::vector<TensorMeta>& out) {
  return conv_backward(
      a, out[0], "conv2d_input_backward", /*weight_grad=*/false,
      [](const ConvShape& s, const void* gy, const void*, const void* w, void* dx) {
        return onednn_conv2d_backward_data(s, gy, w, dx);
      },
      []<typename T>(const T* gy, const T*, const T* w, T* dx, const ConvGeometry& g) {
        conv_input_grad(gy, w, dx, g);
      });
}

// dw is laid out as the weight is (channels-last for a channels-last model).
std::vector<TensorMeta> meta_conv2d_weight_backward(const Args& a) {
  backward_geometry(a, "conv2d_weight_backward");
  return one(layout_like(contiguous_meta(a.tensor(2).dtype(), a.tensor(2).sizes(),
                                         common_device(a, {0, 1, 2}, "conv2d_weight_backward")),
                         a.tensor(2)));
}

std::vector<Tensor> eager_conv2d_weight_backward(const Args& a,
                                                 const std::vector<TensorMeta>& out) {
  return conv_backward(
      a, out[0], "conv2d_weight_backward", /*weight_grad=*/true,
      [](const ConvShape& s, const void* gy, const void* x, const void*, void* dw) {
        return onednn_conv2d_backward_weights(s, gy, x, dw);
      },
      []<typename T>(const T* gy, const T* x, const T*, T* dw, const ConvGeometry& g) {
        conv_weight_grad(gy, x, dw, g);
      });
}

}  // namespace coil::ops
