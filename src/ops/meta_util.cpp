#include "ops/meta_util.h"

#include <algorithm>

namespace coil::ops {

std::string describe(const Tensor& t) {
  return std::string(dtype_short_name(t.dtype())) + shape_str(t.sizes());
}

std::string describe_arg(const Args& a, size_t i) {
  if (a.is_tensor(i)) return describe(a.tensor(i));
  return format_literal(a[i]);
}

TensorMeta contiguous_meta(DType dtype, const Shape& sizes, Device device) {
  return TensorMeta{dtype, sizes, contiguous_strides(sizes), 0, device};
}

TensorMeta channels_last_if(TensorMeta m, const Tensor& a, const Tensor& b) {
  if (m.sizes.size() == 4 &&
      (a.impl()->meta.is_channels_last() || b.impl()->meta.is_channels_last()))
    m.strides = channels_last_strides(m.sizes);
  return m;
}

TensorMeta layout_like(TensorMeta m, const Tensor& like) {
  return like.sizes() == m.sizes ? channels_last_if(std::move(m), like, like) : m;
}

TensorMeta dense_in_order_of(TensorMeta m, const Shape& like_strides) {
  std::vector<size_t> order(m.sizes.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return like_strides[a] > like_strides[b]; });
  int64_t step = 1;
  for (size_t k = order.size(); k-- > 0;) {
    m.strides[order[k]] = step;
    step *= std::max<int64_t>(m.sizes[order[k]], 1);
  }
  // Contiguous but for dims of size 1: their strides as contiguous ones (the symbolic rules'
  // form for such a layout).
  if (m.is_contiguous()) m.strides = contiguous_strides(m.sizes);
  return m;
}

TensorMeta elementwise_meta(const Args& a, std::initializer_list<size_t> idx, DType dtype,
                            const Shape& sizes, Device device) {
  TensorMeta m = contiguous_meta(dtype, sizes, device);
  for (size_t i : idx)
    if (a.is_tensor(i) && a.tensor(i).sizes() == sizes) return layout_like(m, a.tensor(i));
  return m;
}

Shape broadcast_args(const Args& a, std::initializer_list<size_t> idx, const char* op) {
  Shape out;
  for (size_t i : idx)
    if (a.is_tensor(i)) out = broadcast_shapes(out, a.tensor(i).sizes(), op);
  return out;
}

Device common_device(const Args& a, std::initializer_list<size_t> idx, const char* op) {
  std::optional<Device> dev;
  for (size_t i : idx) {
    if (!a.is_tensor(i)) continue;
    Device d = a.tensor(i).device();
    COIL_CHECK(!dev || *dev == d, op, ": expected all tensors on one device, but found ",
               dev->str(), " and ", d.str(), "; move them with .to(device)");
    dev = d;
  }
  return dev.value_or(kCPU);
}

Tensor as_dtype(const Tensor& t, DType dtype) {
  return t.dtype() == dtype ? t : to_dtype_copy(t, dtype);
}

Tensor operand(const Args& a, size_t i, DType dtype) {
  if (a.is_tensor(i)) return as_dtype(a.tensor(i), dtype);
  Tensor t = empty_contiguous({}, dtype);
  fill(t, a.scalar(i));
  return t;
}

}  // namespace coil::ops
