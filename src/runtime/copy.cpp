// Copies between tensors of any dtype and layout, and filling: the runtime's own kernels that
// every op builds on.
#include "runtime/copy.h"

#include "runtime/convert.h"
#include "runtime/cuda_runtime.h"
#include "runtime/device_kernels.h"
#include "runtime/loops.h"

namespace coil {

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    COIL_CHECK(x == y || x == 1 || y == 1, op, ": shapes ", shape_str(a), " and ", shape_str(b),
               " cannot be broadcast together (dim ", i, ": ", x, " vs ", y,
               "); sizes must match or be 1");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  const Shape& sz = t.sizes();
  const Shape& st = t.strides();
  size_t lead = shape.size() - sz.size();
  Shape out(shape.size(), 0);
  for (size_t i = 0; i < sz.size(); ++i) out[lead + i] = sz[i] == 1 ? 0 : st[i];
  return out;
}

void copy_into(const Tensor& dst, const Tensor& src) {
  broadcast_shapes(dst.sizes(), src.sizes(), "copy_");
  COIL_CHECK(src.dim() <= dst.dim(), "copy_: cannot copy a source of sizes ",
             shape_str(src.sizes()), " into a destination of sizes ", shape_str(dst.sizes()));
  for (int64_t i = 0; i < src.dim(); ++i) {
    int64_t s = src.sizes()[src.dim() - 1 - i], d = dst.sizes()[dst.dim() - 1 - i];
    COIL_CHECK(s == d || s == 1, "copy_: source sizes ", shape_str(src.sizes()),
               " do not broadcast to destination sizes ", shape_str(dst.sizes()));
  }
  if (dst.device().is_cuda() || src.device().is_cuda()) {
    // Across devices: the source's elements brought to the destination's device first.
    Tensor from = src;
    if (src.device() != dst.device()) {
      from = empty_contiguous(src.sizes(), src.dtype(), dst.device());
      Tensor dense = src.device().is_cpu() ? contiguous_copy(src) : src;
      if (!dense.is_contiguous()) {
        dense = empty_contiguous(src.sizes(), src.dtype(), src.device());
        copy_into(dense, src);
      }
      cuda::copy(from.impl()->data(), from.device(), dense.impl()->data(), dense.device(),
                 static_cast<size_t>(src.numel()) * itemsize(src.dtype()));
    }
    if (dst.device().is_cpu()) {
      copy_into(dst, from);
      return;
    }
    device_kernels(dst.device().type, "copy_").copy(dst, from);
    return;
  }
  Tensor out = dst;
  dispatch_dtype(dst.dtype(), [&]<typename O>() {
    dispatch_dtype(src.dtype(), [&]<typename I>() {
      map_unary<I, O>(src, out, [](I x) { return convert<O>(x); });
    });
  });
}

Tensor to_dtype_copy(const Tensor& src, DType dtype) {
  Tensor out = empty_contiguous(src.sizes(), dtype, src.device());
  copy_into(out, src);
  return out;
}

Tensor contiguous_copy(const Tensor& src) { return to_dtype_copy(src, src.dtype()); }

void fill(const Tensor& dst, const Scalar& value) {
  if (dst.device().is_cuda()) {
    device_kernels(dst.device().type, "fill_").fill(dst, value);
    return;
  }
  Tensor out = dst;
  dispatch_dtype(dst.dtype(), [&]<typename T>() {
    T v = value.to<T>();
    T* p = static_cast<T*>(out.data_ptr());
    for_each_row<1>(out.sizes(), {out.strides()},
                    [&](std::array<int64_t, 1> off, int64_t n, std::array<int64_t, 1> step) {
                      for (int64_t i = 0; i < n; ++i) p[off[0] + i * step[0]] = v;
                    });
  });
}

}  // namespace coil
