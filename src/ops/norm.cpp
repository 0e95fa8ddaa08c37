// Softmax and the normalisation layers: softmax, log_softmax, layer_norm, rms_norm, batch_norm,
// group_norm. Inputs are made contiguous (batch_norm reads a channels-last one as it is, and
// its result keeps that layout), statistics accumulate in double, and each output element is
// rounded once to the input's dtype. Outputs are contiguous, in the input's dtype.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/norm_util.h"

namespace coil::ops {

namespace {

using namespace norm_detail;

// ---- softmax -----------------------------------------------------------------------------------

// Softmax along the middle dim of x viewed as [outer, n, inner]. Work items are (outer index,
// block of up to kBlock inner positions), so the inner positions of a block share each pass
// over n and the reads along n stay in cache.
template <typename T>
void softmax_kernel(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool log) {
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (inner + kBlock - 1) / kBlock;
  const int64_t items = outer * blocks;
  const bool parallel = outer * n * inner >= kParallelGrain;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t i0 = (item % blocks) * kBlock;
    const int64_t len = std::min(kBlock, inner - i0);
    const int64_t base = (item / blocks) * n * inner + i0;
    const T* xs = x + base;
    T* ys = y + base;
    // Subtracting the max keeps exp in range; a NaN anywhere still makes its column NaN.
    double mx[kBlock], sum[kBlock];
    std::fill_n(mx, len, -std::numeric_limits<double>::infinity());
    std::fill_n(sum, len, 0.0);
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = 0; i < len; ++i) mx[i] = std::max(mx[i], load(xs[k * inner + i]));
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = 0; i < len; ++i) sum[i] += std::exp(load(xs[k * inner + i]) - mx[i]);
    if (log) {
      for (int64_t i = 0; i < len; ++i) sum[i] = mx[i] + std::log(sum[i]);
      for (int64_t k = 0; k < n; ++k)
        for (int64_t i = 0; i < len; ++i)
          ys[k * inner + i] = store<T>(load(xs[k * inner + i]) - sum[i]);
    } else {
      for (int64_t i = 0; i < len; ++i) sum[i] = 1.0 / sum[i];
      for (int64_t k = 0; k < n; ++k)
        for (int64_t i = 0; i < len; ++i)
          ys[k * inner + i] = store<T>(std::exp(load(xs[k * inner + i]) - mx[i]) * sum[i]);
    }
  }
}

TensorMeta softmax_meta(const Args& a, const char* op) {
  const Tensor& x = a.tensor(0);
  check_floating(x, op, "input");
  wrap_dim(a.i64(1), x.dim(), op);
  return contiguous_meta(x.dtype(), x.sizes(), x.device());
}

Tensor softmax_eager(const Args& a, const TensorMeta& out_meta, bool log, const char* op) {
  Tensor x = contiguous_of(a.tensor(0));
  Tensor out = empty_from_meta(out_meta);
  const int64_t d = wrap_dim(a.i64(1), x.dim(), op);
  const Shape& s = x.sizes();
  // A 0-dim tensor is a single row of one element.
  const int64_t n = x.dim() == 0 ? 1 : s[d];
  const int64_t outer = x.dim() == 0 ? 1 : prod(s.begin(), s.begin() + d);
  const int64_t inner = x.dim() == 0 ? 1 : prod(s.begin() + d + 1, s.end());
  if (x.numel() == 0) return out;
  dispatch_floating(x.dtype(), [&]<typename T>() {
    softmax_kernel(x.data_ptr<T>(), out.data_ptr<T>(), outer, n, inner, log);
  });
  return out;
}

// ---- layer_norm, rms_norm ----------------------------------------------------------------------

// Checks that `normalized_shape` is the trailing part of the input's shape and that the
// optional weight/bias have exactly that shape (PyTorch's _check_layer_norm_inputs).
void check_normalized_shape(const Args& a, const char* op, std::initializer_list<size_t> params) {
  const Tensor& x = a.tensor(0);
  const Shape& ns = a.ints(1);
  check_floating(x, op, "input");
  COIL_CHECK(!ns.empty(), op, ": normalized_shape must have at least one dim, got []; pass the ",
             "trailing dims of the input to normalise over, e.g. {", x.dim() ? x.sizes().back() : 1,
             "}");
  const auto nd = static_cast<int64_t>(ns.size());
  bool trailing = x.dim() >= nd && std::equal(ns.begin(), ns.end(), x.sizes().end() - nd);
  COIL_CHECK(trailing, op, ": normalized_shape ", shape_str(ns),
             " must equal the trailing dims of the input, got input ", describe(x));
  for (size_t i : params) {
    if (a.is_none(i)) continue;
    const Tensor& p = a.tensor(i);
    const char* what = i == 2 ? "weight" : "bias";
    check_floating(p, op, what);
    COIL_CHECK(p.sizes() == ns, op, ": ", what, " must have shape normalized_shape ", shape_str(ns),
               ", got ", describe(p));
  }
  common_device(a, {0, 2, 3}, op);
}

struct RowParams {
  std::vector<double> weight, bias;  // empty when not given
  double eps;
  bool rms;  // rms_norm: no mean subtraction, no bias
};

// Normalises each of the `rows` contiguous rows of `m` elements.
template <typename T>
void normalize_rows(const T* x, T* y, int64_t rows, int64_t m, const RowParams& p) {
  const double* w = p.weight.empty() ? nullptr : p.weight.data();
  const double* b = p.bias.empty() ? nullptr : p.bias.data();
  const bool parallel = rows > 1 && rows * m >= kParallelGrain;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * m;
    T* yr = y + r * m;
    double mean = 0, sq = 0;
    if (!p.rms) {
      for (int64_t j = 0; j < m; ++j) mean += load(xr[j]);
      mean /= static_cast<double>(m);
    }
    // Two passes: the variance of (x - mean) does not cancel catastrophically.
    for (int64_t j = 0; j < m; ++j) {
      double d = load(xr[j]) - mean;
      sq += d * d;
    }
    const double rstd = 1.0 / std::sqrt(sq / static_cast<double>(m) + p.eps);
    for (int64_t j = 0; j < m; ++j) {
      double v = (load(xr[j]) - mean) * rstd;
      if (w) v *= w[j];
      if (b) v += b[j];
      yr[j] = store<T>(v);
    }
  }
}

Tensor normalize_eager(const Args& a, const TensorMeta& out_meta, const RowParams& p) {
  Tensor x = contiguous_of(a.tensor(0));
  Tensor out = empty_from_meta(out_meta);
  if (x.numel() == 0) return out;
  const int64_t m = prod(a.ints(1).begin(), a.ints(1).end());
  dispatch_floating(x.dtype(), [&]<typename T>() {
    normalize_rows(x.data_ptr<T>(), out.data_ptr<T>(), x.numel() / m, m, p);
  });
  return out;
}

// ---- batch_norm, group_norm --------------------------------------------------------------------

// Checks that an optional per-channel tensor (weight, bias, running statistics) holds
// `channels` floating values.
void check_per_channel(const Args& a, size_t i, const char* what, int64_t channels,
                       const char* op) {
  if (a.is_none(i)) return;
  const Tensor& p = a.tensor(i);
  check_floating(p, op, what);
  COIL_CHECK(p.numel() == channels, op, ": ", what, " must hold one value per channel (", channels,
             " for input ", describe(a.tensor(0)), "), got ", describe(p));
}

// Mean and biased variance of `count` elements read as `groups` runs of `len` contiguous
// elements, `gap` elements apart.
template <typename T>
std::pair<double, double> moments(const T* x, int64_t groups, int64_t len, int64_t gap) {
  const double count = static_cast<double>(groups * len);
  double mean = 0, sq = 0;
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t j = 0; j < len; ++j) mean += load(x[g * gap + j]);
  mean /= count;
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t j = 0; j < len; ++j) {
      double d = load(x[g * gap + j]) - mean;
      sq += d * d;
    }
  return {mean, sq / count};
}

// y = x * scale[c] + shift[c] over x viewed as [n, c, s].
template <typename T>
void affine_channels(const T* x, T* y, int64_t n, int64_t c, int64_t s,
                     const std::vector<double>& scale, const std::vector<double>& shift) {
  const bool parallel = n * c > 1 && n * c * s >= kParallelGrain;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < n * c; ++r) {
    const double sc = scale[r % c], sh = shift[r % c];
    for (int64_t j = 0; j < s; ++j) y[r * s + j] = store<T>(load(x[r * s + j]) * sc + sh);
  }
}

// Writes `values` (in logical order) into `dst`, whatever its dtype and layout.
void write_values(const Tensor& dst, const std::vector<double>& values) {
  Tensor tmp = empty_contiguous(dst.sizes(), kFloat64);
  std::copy(values.begin(), values.end(), tmp.data_ptr<double>());
  copy_into(dst, tmp);
}

// Per-channel batch statistics of x viewed as [n, c, s]: means and biased variances.
template <typename T>
void channel_moments(const T* x, int64_t n, int64_t c, int64_t s, std::vector<double>& mean,
                     std::vector<double>& var) {
  const bool parallel = c > 1 && n * c * s >= kParallelGrain;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t ch = 0; ch < c; ++ch) std::tie(mean[ch], var[ch]) = moments(x + ch * s, n, s, c * s);
}

// Per-channel batch statistics of channels-last x, `rows` rows (n x h x w) of c channels:
// each thread sums its rows into a row of partial sums (consecutive channels side by side),
// for the means, then the squared deviations the same way.
template <typename T>
void channel_moments_nhwc(const T* x, int64_t rows, int64_t c, std::vector<double>& mean,
                          std::vector<double>& var) {
  const bool parallel = rows > 1 && rows * c >= kParallelGrain;
  const int threads = parallel ? omp_get_max_threads() : 1;
  std::vector<double> sums(static_cast<size_t>(threads * c));
  auto accumulate = [&](auto term) {
    std::fill(sums.begin(), sums.end(), 0.0);
#pragma omp parallel num_threads(threads) if (parallel)
    {
      double* mine = sums.data() + static_cast<size_t>(omp_get_thread_num() * c);
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t ch = 0; ch < c; ++ch) mine[ch] += term(load(x[r * c + ch]), ch);
    }
    std::vector<double> total(static_cast<size_t>(c), 0.0);
    for (int t = 0; t < threads; ++t)
      for (int64_t ch = 0; ch < c; ++ch) total[ch] += sums[static_cast<size_t>(t * c + ch)];
    return total;
  };
  const double count = static_cast<double>(rows);
  mean = accumulate([](double v, int64_t) { return v; });
  for (double& m : mean) m /= count;
  var = accumulate([&](double v, int64_t ch) { return (v - mean[ch]) * (v - mean[ch]); });
  for (double& v : var) v /= count;
}

// y = x * scale[c] + shift[c] over channels-last x, `rows` rows of c channels.
template <typename T>
void affine_channels_nhwc(const T* x, T* y, int64_t rows, int64_t c,
                          const std::vector<double>& scale, const std::vector<double>& shift) {
  const bool parallel = rows > 1 && rows * c >= kParallelGrain;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t ch = 0; ch < c; ++ch)
      y[r * c + ch] = store<T>(load(x[r * c + ch]) * scale[ch] + shift[ch]);
}

}  // namespace

std::vector<TensorMeta> meta_softmax(const Args& a) { return one(softmax_meta(a, "softmax")); }
std::vector<Tensor> eager_softmax(const Args& a, const std::vector<TensorMeta>& out) {
  return one(softmax_eager(a, out[0], /*log=*/false, "softmax"));
}

std::vector<TensorMeta> meta_log_softmax(const Args& a) {
  return one(softmax_meta(a, "log_softmax"));
}
std::vector<Tensor> eager_log_softmax(const Args& a, const std::vector<TensorMeta>& out) {
  return one(softmax_eager(a, out[0], /*log=*/true, "log_softmax"));
}

// layer_norm(input, normalized_shape, weight?, bias?, eps)
std::vector<TensorMeta> meta_layer_norm(const Args& a) {
  check_normalized_shape(a, "layer_norm", {2, 3});
  const Tensor& x = a.tensor(0);
  return one(contiguous_meta(x.dtype(), x.sizes(), x.device()));
}
std::vector<Tensor> eager_layer_norm(const Args& a, const std::vector<TensorMeta>& out) {
  RowParams p{param_values(a.opt_tensor(2)), param_values(a.opt_tensor(3)), a.f64(4), false};
  return one(normalize_eager(a, out[0], p));
}

// rms_norm(input, normalized_shape, weight?, eps?)
std::vector<TensorMeta> meta_rms_norm(const Args& a) {
  check_normalized_shape(a, "rms_norm", {2});
  const Tensor& x = a.tensor(0);
  return one(contiguous_meta(x.dtype(), x.sizes(), x.device()));
}
std::vector<Tensor> eager_rms_norm(const Args& a, const std::vector<TensorMeta>& out) {
  // PyTorch's default eps is the machine epsilon of the type it computes in: float's for
  // float16/bfloat16/float32 inputs, double's for float64.
  DType t = a.tensor(0).dtype();
  double default_eps = t == kFloat64 ? std::numeric_limits<double>::epsilon()
                                     : std::numeric_limits<float>::epsilon();
  RowParams p{param_values(a.opt_tensor(2)), {}, a.opt_f64(3).value_or(default_eps), true};
  return one(normalize_eager(a, out[0], p));
}

// batch_norm(input, weight?, bias?, running_mean?, running_var?, training, momentum, eps)
std::vector<TensorMeta> meta_batch_norm(const Args& a) {
  const char* op = "batch_norm";
  const Tensor& x = a.tensor(0);
  check_floating(x, op, "input");
  COIL_CHECK(x.dim() >= 2, op, ": expected an input of shape [N, C, ...] (at least 2 dims), got ",
             describe(x));
  const int64_t c = x.size(1);
  check_per_channel(a, 1, "weight", c, op);
  check_per_channel(a, 2, "bias", c, op);
  check_per_channel(a, 3, "running_mean", c, op);
  check_per_channel(a, 4, "running_var", c, op);
  common_device(a, {0, 1, 2, 3, 4}, op);
  if (a.b(5)) {
    // As torch.nn.functional.batch_norm: one value per channel has no variance to normalise by.
    COIL_CHECK(x.numel() / std::max<int64_t>(c, 1) != 1 || x.numel() == 0, op,
               ": expected more than 1 value per channel when training, got input ", describe(x));
  } else {
    COIL_CHECK(!a.is_none(3) && !a.is_none(4), op,
               ": running_mean and running_var are required in eval mode (training=false); pass ",
               "them, or set training=true to normalise by the batch statistics");
  }
  return one(layout_like(contiguous_meta(x.dtype(), x.sizes(), x.device()), x));
}

std::vector<Tensor> eager_batch_norm(const Args& a, const std::vector<TensorMeta>& out_meta) {
  const Tensor result = empty_from_meta(out_meta[0]);
  // A channels-last input (and so result) is read and written as rows of channels; any other
  // layout is normalised in NCHW order (and copied into a channels-last result).
  const bool nhwc = result.suggest_memory_format() == MemoryFormat::ChannelsLast &&
                    a.tensor(0).strides() == result.strides();
  Tensor x = nhwc ? a.tensor(0) : contiguous_of(a.tensor(0));
  Tensor out =
      nhwc || result.is_contiguous() ? result : empty_contiguous(result.sizes(), result.dtype());
  if (x.numel() == 0) return one(result);  // nothing to normalise; running stats stay as they are
  const int64_t n = x.size(0), c = x.size(1), s = x.numel() / (n * c);
  const bool training = a.b(5);
  const double momentum = a.f64(6), eps = a.f64(7);
  Tensor running_mean = a.opt_tensor(3), running_var = a.opt_tensor(4);

  std::vector<double> mean(c), var(c);
  if (training) {
    dispatch_floating(x.dtype(), [&]<typename T>() {
      if (nhwc)
        channel_moments_nhwc(x.data_ptr<T>(), n * s, c, mean, var);
      else
        channel_moments(x.data_ptr<T>(), n, c, s, mean, var);
    });
    // Running statistics use the unbiased variance, as in PyTorch.
    const double count = static_cast<double>(n * s);
    if (running_mean.defined()) {
      std::vector<double> rm = param_values(running_mean);
      for (int64_t ch = 0; ch < c; ++ch) rm[ch] = (1 - momentum) * rm[ch] + momentum * mean[ch];
      write_values(running_mean, rm);
    }
    if (running_var.defined()) {
      std::vector<double> rv = param_values(running_var);
      for (int64_t ch = 0; ch < c; ++ch)
        rv[ch] = (1 - momentum) * rv[ch] + momentum * var[ch] * count / (count - 1);
      write_values(running_var, rv);
    }
  } else {
    mean = param_values(running_mean);
    var = param_values(running_var);
  }

  std::vector<double> w = param_values(a.opt_tensor(1)), b = param_values(a.opt_tensor(2));
  std::vector<double> scale(c), shift(c);
  for (int64_t ch = 0; ch < c; ++ch) {
    scale[ch] = (w.empty() ? 1.0 : w[ch]) / std::sqrt(var[ch] + eps);
    shift[ch] = (b.empty() ? 0.0 : b[ch]) - mean[ch] * scale[ch];
  }
  dispatch_floating(x.dtype(), [&]<typename T>() {
    if (nhwc)
      affine_channels_nhwc(x.data_ptr<T>(), out.data_ptr<T>(), n * s, c, scale, shift);
    else
      affine_channels(x.data_ptr<T>(), out.data_ptr<T>(), n, c, s, scale, shift);
  });
  if (!out.is_same(result)) copy_into(result, out);
  return one(result);
}

// group_norm(input, num_groups, weight?, bias?, eps)
std::vector<TensorMeta> meta_group_norm(const Args& a) {
  const char* op = "group_norm";
  const Tensor& x = a.tensor(0);
  const int64_t groups = a.i64(1);
  check_floating(x, op, "input");
  COIL_CHECK(x.dim() >= 2, op, ": expected an input of shape [N, C, ...] (at least 2 dims), got ",
             describe(x));
  const int64_t c = x.size(1);
  COIL_CHECK(groups > 0 && c % groups == 0, op, ": the number of channels (", c, " in input ",
             describe(x), ") must be divisible by num_groups (", groups, ")");
  for (size_t i : {2, 3}) {
    if (a.is_none(i)) continue;
    const char* what = i == 2 ? "weight" : "bias";
    const Tensor& p = a.tensor(i);
    check_floating(p, op, what);
    COIL_CHECK(p.sizes() == Shape{c}, op, ": ", what, " must have shape [", c,
               "] (one value per channel of input ", describe(x), "), got ", describe(p));
  }
  common_device(a, {0, 2, 3}, op);
  return one(contiguous_meta(x.dtype(), x.sizes(), x.device()));
}

std::vector<Tensor> eager_group_norm(const Args& a, const std::vector<TensorMeta>& out_meta) {
  Tensor x = contiguous_of(a.tensor(0));
  Tensor out = empty_from_meta(out_meta[0]);
  if (x.numel() == 0) return one(out);
  const int64_t n = x.size(0), c = x.size(1), groups = a.i64(1);
  const int64_t per_group = c / groups, s = x.numel() / (n * c);
  const double eps = a.f64(4);
  std::vector<double> w = param_values(a.opt_tensor(2)), b = param_values(a.opt_tensor(3));
  dispatch_floating(x.dtype(), [&]<typename T>() {
    const T* px = x.data_ptr<T>();
    T* py = out.data_ptr<T>();
    const int64_t len = per_group * s;  // each (sample, group) is one contiguous run
    const bool parallel = n * groups > 1 && x.numel() >= kParallelGrain;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t r = 0; r < n * groups; ++r) {
      auto [mean, var] = moments(px + r * len, 1, len, 0);
      const double rstd = 1.0 / std::sqrt(var + eps);
      for (int64_t k = 0; k < per_group; ++k) {
        const int64_t ch = (r % groups) * per_group + k;
        const double sc = (w.empty() ? 1.0 : w[ch]) * rstd;
        const double sh = (b.empty() ? 0.0 : b[ch]) - mean * sc;
        const int64_t base = r * len + k * s;
        for (int64_t j = 0; j < s; ++j) py[base + j] = store<T>(load(px[base + j]) * sc + sh);
      }
    }
  });
  return one(out);
}

}  // namespace coil::ops
