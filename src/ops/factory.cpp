// Factories: ops with no tensor inputs that make a new tensor (full, arange, rand, ...).
#include <cmath>

#include "ops/meta_util.h"
#include "runtime/convert.h"
#include "runtime/random.h"

namespace coil::ops {

namespace {
void check_sizes(const Shape& size, const char* op) {
  for (int64_t s : size)
    COIL_CHECK(s >= 0, op, ": negative dimension ", s, " in size ", shape_str(size));
}
Device device_arg(const Args& a, size_t i) { return a.opt_device(i).value_or(kCPU); }

void check_floating(DType t, const char* op) {
  COIL_CHECK(is_floating(t), op, ": needs a floating-point dtype, got ", dtype_name(t),
             " (use randint for integers)");
}
}  // namespace

std::vector<TensorMeta> meta_full(const Args& a) {
  check_sizes(a.ints(0), "full");
  DType t = a.opt_dtype(2).value_or(a.scalar(1).default_dtype());
  return one(contiguous_meta(t, a.ints(0), device_arg(a, 3)));
}
std::vector<Tensor> eager_full(const Args& a, const std::vector<TensorMeta>& out) {
  Tensor t = empty_from_meta(out[0]);
  fill(t, a.scalar(1));
  return one(t);
}

namespace {
int64_t arange_length(const Args& a) {
  double start = a.scalar(0).to_double(), end = a.scalar(1).to_double(),
         step = a.scalar(2).to_double();
  COIL_CHECK(step != 0, "arange: step must be nonzero");
  COIL_CHECK(std::isfinite(start) && std::isfinite(end), "arange: start and end must be finite");
  COIL_CHECK((end - start) * step >= 0, "arange: the range from ", a.scalar(0).str(), " to ",
             a.scalar(1).str(), " is not reachable with step ", a.scalar(2).str());
  return static_cast<int64_t>(std::ceil((end - start) / step));
}
}  // namespace

std::vector<TensorMeta> meta_arange(const Args& a) {
  bool any_float =
      a.scalar(0).is_floating() || a.scalar(1).is_floating() || a.scalar(2).is_floating();
  DType t = a.opt_dtype(3).value_or(any_float ? kFloat32 : kInt64);
  return one(contiguous_meta(t, {arange_length(a)}, device_arg(a, 4)));
}
std::vector<Tensor> eager_arange(const Args& a, const std::vector<TensorMeta>& out) {
  Tensor t = empty_from_meta(out[0]);
  bool ints = !is_floating(out[0].dtype);
  dispatch_dtype(out[0].dtype, [&]<typename T>() {
    T* p = static_cast<T*>(t.data_ptr());
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (ints) {
        p[i] = convert<T>(a.scalar(0).to_int() + i * a.scalar(2).to_int());
      } else {
        p[i] =
            convert<T>(a.scalar(0).to_double() + static_cast<double>(i) * a.scalar(2).to_double());
      }
    }
  });
  return one(t);
}

std::vector<TensorMeta> meta_linspace(const Args& a) {
  COIL_CHECK(a.i64(2) >= 0, "linspace: steps must be non-negative, got ", a.i64(2));
  return one(contiguous_meta(a.opt_dtype(3).value_or(kFloat32), {a.i64(2)}, device_arg(a, 4)));
}
std::vector<Tensor> eager_linspace(const Args& a, const std::vector<TensorMeta>& out) {
  Tensor t = empty_from_meta(out[0]);
  double start = a.scalar(0).to_double(), end = a.scalar(1).to_double();
  int64_t n = a.i64(2);
  double step = n > 1 ? (end - start) / static_cast<double>(n - 1) : 0;
  dispatch_dtype(out[0].dtype, [&]<typename T>() {
    T* p = static_cast<T*>(t.data_ptr());
    // Fill from both ends, as PyTorch does, so the last value is exactly `end`.
    for (int64_t i = 0; i < n; ++i) {
      double v = (n == 1 || i < n / 2) ? start + step * static_cast<double>(i)
                                       : end - step * static_cast<double>(n - 1 - i);
      p[i] = convert<T>(v);
    }
  });
  return one(t);
}

std::vector<TensorMeta> meta_eye(const Args& a) {
  int64_t n = a.i64(0), m = a.opt_i64(1).value_or(n);
  COIL_CHECK(n >= 0 && m >= 0, "eye: sizes must be non-negative, got n=", n, ", m=", m);
  return one(contiguous_meta(a.opt_dtype(2).value_or(kFloat32), {n, m}, device_arg(a, 3)));
}
std::vector<Tensor> eager_eye(const Args&, const std::vector<TensorMeta>& out) {
  Tensor t = empty_from_meta(out[0]);
  fill(t, 0);
  int64_t n = out[0].sizes[0], m = out[0].sizes[1];
  dispatch_dtype(out[0].dtype, [&]<typename T>() {
    T* p = static_cast<T*>(t.data_ptr());
    for (int64_t i = 0; i < std::min(n, m); ++i) p[i * m + i] = convert<T>(1);
  });
  return one(t);
}

std::vector<TensorMeta> meta_rand(const Args& a) {
  check_sizes(a.ints(0), "rand");
  DType t = a.opt_dtype(1).value_or(kFloat32);
  check_floating(t, "rand");
  return one(contiguous_meta(t, a.ints(0), device_arg(a, 2)));
}
std::vector<Tensor> eager_rand(const Args&, const std::vector<TensorMeta>& out) {
  Tensor t = empty_from_meta(out[0]);
  fill_uniform(t, 0.0, 1.0);
  return one(t);
}

std::vector<TensorMeta> meta_randn(const Args& a) {
  check_sizes(a.ints(0), "randn");
  DType t = a.opt_dtype(1).value_or(kFloat32);
  check_floating(t, "randn");
  return one(contiguous_meta(t, a.ints(0), device_arg(a, 2)));
}
std::vector<Tensor> eager_randn(const Args&, const std::vector<TensorMeta>& out) {
  Tensor t = empty_from_meta(out[0]);
  fill_normal(t, 0.0, 1.0);
  return one(t);
}

std::vector<TensorMeta> meta_randint(const Args& a) {
  COIL_CHECK(a.i64(1) > a.i64(0), "randint: high (", a.i64(1), ") must be greater than low (",
             a.i64(0), ")");
  check_sizes(a.ints(2), "randint");
  return one(contiguous_meta(a.opt_dtype(3).value_or(kInt64), a.ints(2), device_arg(a, 4)));
}
std::vector<Tensor> eager_randint(const Args& a, const std::vector<TensorMeta>& out) {
  Tensor t = empty_from_meta(out[0]);
  fill_randint(t, a.i64(0), a.i64(1));
  return one(t);
}

}  // namespace coil::ops
