// The GPU's own eager kernels for the ops a library or a kernel of coil's own runs better than a
// compiled call would (registered with the dispatcher per op: graph/registry.h's DeviceKernel):
// fills and copies with their values and layouts as arguments, matrix products on cuBLASLt,
// convolutions and average pools on cuDNN, and coil's kernels for cumsum, scatter_add, max and
// odd average pools, and attention. A kernel returns nullopt where it declines the arguments;
// the op is then compiled (compile/device_eager.cpp) or runs on the CPU.
#include <array>
#include <cmath>

#include <coil/error.h>

#include "backends/cuda/avg_pool.h"
#include "backends/cuda/cublaslt.h"
#include "backends/cuda/cudnn_calls.h"
#include "backends/cuda/flash_attention.h"
#include "backends/cuda/cudnn_attention.h"
#include "backends/cuda/flash_attention_backward.h"
#include "backends/cuda/max_pool.h"
#include "backends/cuda/scan_scatter.h"
#include "graph/dims.h"
#include "graph/registry.h"
#include "runtime/copy.h"
#include "runtime/tensor_impl.h"

namespace coil::cuda {

namespace {

using Results = std::optional<std::vector<Tensor>>;
using Metas = std::vector<TensorMeta>;

// conv2d's window from its arguments (or its backward ops', which keep the same positions).
ConvWindow window_of(const Args& a) {
  auto pair = [&](size_t i) { return std::array<int64_t, 2>{a.ints(i)[0], a.ints(i).back()}; };
  return ConvWindow{pair(3), pair(4), pair(5), a.i64(6)};
}

// The pool of an average-pooling op (or of its gradient) as cuDNN takes it, or nullopt for what
// cuDNN has no form of (ceil_mode, an adaptive pool whose windows differ in size).
std::optional<PoolWindow> pool_window(OpId op, const Args& a) {
  const bool backward = op == OpId::avg_pool2d_backward || op == OpId::adaptive_avg_pool2d_backward;
  const size_t self = backward ? 1 : 0;
  const Tensor& x = a.tensor(self);
  auto pair = [](const Shape& v) { return std::array<int64_t, 2>{v[0], v.back()}; };
  if (op == OpId::adaptive_avg_pool2d || op == OpId::adaptive_avg_pool2d_backward) {
    const std::array<int64_t, 2> out =
        backward ? std::array<int64_t, 2>{a.tensor(0).size(-2), a.tensor(0).size(-1)}
                 : pair(a.ints(1));
    const int64_t h = x.size(-2), w = x.size(-1);
    if (out[0] == 0 || out[1] == 0 || h % out[0] != 0 || w % out[1] != 0) return std::nullopt;
    const std::array<int64_t, 2> k{h / out[0], w / out[1]};
    return PoolWindow{k, k, {0, 0}, true};
  }
  const std::array<int64_t, 2> kernel = pair(a.ints(self + 1));
  const Shape& stride = a.ints(self + 2);
  if (a.b(self + 4)) return std::nullopt;  // ceil_mode
  return PoolWindow{kernel, stride.empty() ? kernel : pair(stride), pair(a.ints(self + 3)),
                    a.b(self + 5)};
}

// The same pool as coil's own kernels take it: any window.
AvgPoolWindow avg_window(OpId op, const Args& a) {
  if (op == OpId::adaptive_avg_pool2d || op == OpId::adaptive_avg_pool2d_backward)
    return {true, {}, {}, {}, false};
  const size_t self = op == OpId::avg_pool2d_backward ? 1 : 0;
  auto pair = [](const Shape& v) { return std::array<int64_t, 2>{v[0], v.back()}; };
  const Shape& stride = a.ints(self + 2);
  return {false, pair(a.ints(self + 1)), pair(stride.empty() ? a.ints(self + 1) : stride),
          pair(a.ints(self + 3)), a.b(self + 5)};
}

// The window of max_pool2d (input at 0) or of its gradients (input at 1): kernel, stride
// (empty: the kernel's), padding, dilation; the output's size carries ceil_mode.
MaxPoolWindow max_pool_window(const Args& a, size_t self) {
  auto pair = [](const Shape& v) { return std::array<int64_t, 2>{v[0], v.back()}; };
  const Shape& stride = a.ints(self + 2);
  return {pair(a.ints(self + 1)), pair(stride.empty() ? a.ints(self + 1) : stride),
          pair(a.ints(self + 3)), pair(a.ints(self + 4))};
}

// A 3-D (C, H, W) tensor as the 4-D batch of one that cuDNN takes.
Tensor batch_of_one(const Tensor& t) {
  if (t.dim() == 4) return t;
  return alias_with(t, {1, t.size(0), t.size(1), t.size(2)},
                    {t.numel(), t.stride(0), t.stride(1), t.stride(2)}, t.storage_offset());
}

Results one(Tensor t) { return std::vector<Tensor>{std::move(t)}; }

// Fills and copies: the runtime's kernels, which take sizes, strides and the value as arguments,
// so an eager call compiles nothing (a scalar that changes every step, as an optimizer's bias
// correction, would otherwise compile a kernel per value).
Results full_kernel(OpId, const Args& a, const Metas& metas) {
  Tensor out = empty_from_meta(metas.at(0));
  fill(out, a.scalar(1));
  return one(out);
}

Results copy_kernel(OpId op, const Args& a, const Metas&) {
  if (op == OpId::contiguous && a.tensor(0).is_contiguous()) return one(a.tensor(0));
  return one(contiguous_copy(a.tensor(0)));
}

Results product_kernel(OpId op, const Args& a, const Metas& metas) {
  Tensor out = empty_contiguous(metas.at(0).sizes, metas.at(0).dtype, metas.at(0).device);
  if (op == OpId::mm || op == OpId::bmm)
    matmul(a.tensor(0), a.tensor(1), out, Tensor(), Epilogue::none);
  else
    matmul(a.tensor(1), a.tensor(2), out, a.tensor(0),
           op == OpId::addmm_relu ? Epilogue::relu : Epilogue::none);
  return one(out);
}

// A scan and a scatter: kernels of coil's own (scan_scatter.h).
Results cumsum_kernel(OpId, const Args& a, const Metas& metas) {
  Tensor out = empty_from_meta(metas.at(0));
  const Tensor& x = a.tensor(0);
  cuda::cumsum(x.dtype() == out.dtype() ? x : x.to(out.dtype()),
               wrap_dim(a.i64(1), x.dim(), "cumsum"), out);
  return one(out);
}

Results scatter_add_kernel(OpId, const Args& a, const Metas& metas) {
  Tensor out = empty_from_meta(metas.at(0));
  copy_into(out, a.tensor(0));
  cuda::scatter_add(out, wrap_dim(a.i64(1), out.dim(), "scatter_add"), a.tensor(2), a.tensor(3));
  return one(out);
}

// Convolutions: cuDNN's, when it loads (else the CPU's kernel on copies).
Results conv_kernel(OpId op, const Args& a, const Metas& metas) {
  if (!cudnn_available()) return std::nullopt;
  Tensor out = empty_from_meta(metas.at(0));
  const ConvWindow w = window_of(a);
  if (op == OpId::conv2d)
    conv2d_forward(batch_of_one(a.tensor(0)), a.tensor(1), a.opt_tensor(2), batch_of_one(out), w);
  else if (op == OpId::conv2d_input_backward)
    conv2d_input_grad(a.tensor(0), a.tensor(2), out, w);
  else
    conv2d_weight_grad(a.tensor(0), a.tensor(1), out, w);
  return one(out);
}

// The result of `meta` as `write` gives it into a contiguous tensor: for the pools, whose kernels
// write NCHW planes, where their result follows a channels-last input (copied into its layout).
template <typename Write>
Results written_contiguous(const TensorMeta& meta, Write write) {
  Tensor out = empty_from_meta(meta);
  if (out.is_contiguous()) {
    write(out);
    return one(out);
  }
  Tensor planes = empty_contiguous(meta.sizes, meta.dtype, meta.device);
  write(planes);
  copy_into(out, planes);
  return one(out);
}

// Max pooling and its derivatives: kernels of coil's own (max_pool.h).
Results max_pool_kernel(OpId op, const Args& a, const Metas& metas) {
  return written_contiguous(metas.at(0), [&](const Tensor& out) {
    if (op == OpId::max_pool2d)
      max_pool2d(a.tensor(0), out, max_pool_window(a, 0));
    else if (op == OpId::max_pool2d_backward)
      max_pool2d_backward(a.tensor(0), a.tensor(1), out, max_pool_window(a, 1));
    else
      max_pool2d_double_backward(a.tensor(0), a.tensor(1), out, max_pool_window(a, 1));
  });
}

// Average pooling and its gradients: cuDNN's, where it has the pool (and loads); else kernels
// of coil's own (avg_pool.h): ceil_mode, uneven adaptive windows, integers.
Results avg_pool_kernel(OpId op, const Args& a, const Metas& metas) {
  const bool forward = op == OpId::avg_pool2d || op == OpId::adaptive_avg_pool2d;
  const std::optional<PoolWindow> w = pool_window(op, a);
  return written_contiguous(metas.at(0), [&](const Tensor& out) {
    if (w && cudnn_available() && is_floating(a.tensor(0).dtype())) {
      if (forward)
        pool2d_forward(a.tensor(0), out, *w);
      else
        pool2d_backward(a.tensor(0), a.tensor(1), out, *w);
    } else if (forward) {
      avg_pool2d(a.tensor(0), out, avg_window(op, a));
    } else {
      avg_pool2d_backward(a.tensor(0), out, avg_window(op, a));
    }
  });
}

// The scores' scale: the call's, else 1 / sqrt(head size).
double attention_scale(std::optional<double> scale, const Tensor& q) {
  return scale.value_or(1 / std::sqrt(static_cast<double>(q.size(-1))));
}

// Attention without a mask (or with a causal one) and without dropout: cuDNN's flash attention
// on the tensor cores for 16-bit floats where it takes the operands, else coil's fused kernel;
// otherwise the decomposition (or the CPU, when it declines).
Results attention_kernel(OpId, const Args& a, const Metas& metas) {
  const Tensor &q = a.tensor(0), &v = a.tensor(2);
  if (!a.is_none(3) || a.f64(4) > 0 || q.size(-1) == 0 || !attention_fits(q.size(-1), v.size(-1)))
    return std::nullopt;
  Tensor out = empty_from_meta(metas.at(0));
  const double scale = attention_scale(a.opt_f64(6), q);
  if (!cudnn_attention(q, a.tensor(1), v, out, Tensor(), scale, a.b(5)))
    attention(q, a.tensor(1), v, out, scale, a.b(5));
  return one(out);
}

// Attention with its rows' log-sum-exp: cuDNN's (else the CPU, on copies).
Results attention_stats_kernel(OpId, const Args& a, const Metas& metas) {
  const Tensor& q = a.tensor(0);
  Tensor out = empty_from_meta(metas.at(0)), stats = empty_from_meta(metas.at(1));
  if (!cudnn_attention(q, a.tensor(1), a.tensor(2), out, stats, attention_scale(a.opt_f64(4), q),
                       a.b(3)))
    return std::nullopt;
  return Results(std::vector<Tensor>{out, stats});
}

// Its backward for self-attention: cuDNN's for 16-bit floats (from the forward's log-sum-exp,
// or one a forward makes again where it was not kept), two kernels of coil's own for float32,
// where they take the head size (else the CPU, on copies).
Results attention_backward_kernel(OpId, const Args& a, const Metas& metas) {
  const Tensor &g = a.tensor(0), &q = a.tensor(1), &k = a.tensor(2), &v = a.tensor(3),
               &o = a.tensor(4);
  const double scale = attention_scale(a.opt_f64(6), q);
  if (cudnn_attention_takes(q.dtype(), q.size(-1), v.size(-1))) {
    Tensor out = empty_from_meta(metas.at(0)), stats = a.opt_tensor(7);
    const Shape rows(q.sizes().begin(), q.sizes().end() - 1);
    const bool kept = stats.defined() && stats.dtype() == kFloat32 && stats.sizes() == rows &&
                      stats.is_contiguous();
    if (!kept) stats = empty(rows, kFloat32, q.device());
    if ((kept || cudnn_attention(q, k, v, empty_like(o), stats, scale, a.b(5))) &&
        cudnn_attention_backward(g, q, k, v, o, stats, out, scale, a.b(5)))
      return one(out);
  }
  if (!attention_backward_fits(q)) return std::nullopt;
  Tensor out = empty_from_meta(metas.at(0));
  attention_backward(g, q, k, v, o, out, scale, a.b(5));
  return one(out);
}

[[maybe_unused]] const bool registered = [] {
  const std::pair<OpId, DeviceKernel> kernels[] = {
      {OpId::full, full_kernel},
      {OpId::contiguous, copy_kernel},
      {OpId::clone, copy_kernel},
      {OpId::mm, product_kernel},
      {OpId::bmm, product_kernel},
      {OpId::addmm, product_kernel},
      {OpId::addmm_relu, product_kernel},
      {OpId::cumsum, cumsum_kernel},
      {OpId::scatter_add, scatter_add_kernel},
      {OpId::conv2d, conv_kernel},
      {OpId::conv2d_input_backward, conv_kernel},
      {OpId::conv2d_weight_backward, conv_kernel},
      {OpId::max_pool2d, max_pool_kernel},
      {OpId::max_pool2d_backward, max_pool_kernel},
      {OpId::max_pool2d_double_backward, max_pool_kernel},
      {OpId::avg_pool2d, avg_pool_kernel},
      {OpId::adaptive_avg_pool2d, avg_pool_kernel},
      {OpId::avg_pool2d_backward, avg_pool_kernel},
      {OpId::adaptive_avg_pool2d_backward, avg_pool_kernel},
      {OpId::scaled_dot_product_attention, attention_kernel},
      {OpId::scaled_dot_product_attention_backward, attention_backward_kernel},
      {OpId::scaled_dot_product_attention_stats, attention_stats_kernel},
  };
  for (const auto& [op, kernel] : kernels) register_device_kernel(DeviceType::CUDA, op, kernel);
  return true;
}();

}  // namespace

}  // namespace coil::cuda
