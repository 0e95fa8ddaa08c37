#include "graph/arg.h"

#include <coil/error.h>

namespace coil {

namespace {
template <typename T>
const T& get(const std::vector<Arg>& v, size_t i, const char* want) {
  const T* p = std::get_if<T>(&v.at(i));
  COIL_ASSERT(p != nullptr, "argument ", i, " is not ", want);
  return *p;
}
}  // namespace

const Tensor& Args::tensor(size_t i) const { return get<Tensor>(v_, i, "a tensor"); }
Tensor Args::opt_tensor(size_t i) const { return is_none(i) ? Tensor() : tensor(i); }
const std::vector<Tensor>& Args::tensors(size_t i) const {
  return get<std::vector<Tensor>>(v_, i, "a tensor list");
}

Scalar Args::scalar(size_t i) const {
  const Arg& a = v_.at(i);
  if (auto* s = std::get_if<Scalar>(&a)) return *s;
  if (auto* n = std::get_if<int64_t>(&a)) return Scalar(*n);
  if (auto* d = std::get_if<double>(&a)) return Scalar(*d);
  if (auto* b = std::get_if<bool>(&a)) return Scalar(*b);
  if (auto* s = std::get_if<SymIntArg>(&a)) return Scalar(s->hint);
  COIL_ASSERT(false, "argument ", i, " is not a number");
  return {};
}
std::optional<Scalar> Args::opt_scalar(size_t i) const {
  return is_none(i) ? std::nullopt : std::optional<Scalar>(scalar(i));
}

int64_t Args::i64(size_t i) const {
  const Arg& a = v_.at(i);
  if (auto* n = std::get_if<int64_t>(&a)) return *n;
  if (auto* s = std::get_if<Scalar>(&a); s && !s->is_floating()) return s->to_int();
  if (auto* b = std::get_if<bool>(&a)) return *b;
  if (auto* s = std::get_if<SymIntArg>(&a)) return s->hint;
  COIL_ASSERT(false, "argument ", i, " is not an int");
  return 0;
}
std::optional<int64_t> Args::opt_i64(size_t i) const {
  return is_none(i) ? std::nullopt : std::optional<int64_t>(i64(i));
}

const Shape& Args::ints(size_t i) const {
  if (auto* s = std::get_if<SymIntsArg>(&v_.at(i))) return s->hints;
  return get<Shape>(v_, i, "an int list");
}
std::optional<Shape> Args::opt_ints(size_t i) const {
  return is_none(i) ? std::nullopt : std::optional<Shape>(ints(i));
}

double Args::f64(size_t i) const {
  const Arg& a = v_.at(i);
  if (auto* d = std::get_if<double>(&a)) return *d;
  if (auto* n = std::get_if<int64_t>(&a)) return static_cast<double>(*n);
  if (auto* s = std::get_if<Scalar>(&a)) return s->to_double();
  if (auto* s = std::get_if<SymIntArg>(&a)) return static_cast<double>(s->hint);
  COIL_ASSERT(false, "argument ", i, " is not a float");
  return 0;
}
std::optional<double> Args::opt_f64(size_t i) const {
  return is_none(i) ? std::nullopt : std::optional<double>(f64(i));
}

bool Args::b(size_t i) const { return get<bool>(v_, i, "a bool"); }
DType Args::dtype(size_t i) const { return get<DType>(v_, i, "a dtype"); }
std::optional<DType> Args::opt_dtype(size_t i) const {
  return is_none(i) ? std::nullopt : std::optional<DType>(dtype(i));
}
const std::string& Args::str(size_t i) const { return get<std::string>(v_, i, "a string"); }
std::optional<std::string> Args::opt_str(size_t i) const {
  return is_none(i) ? std::nullopt : std::optional<std::string>(str(i));
}
Device Args::device(size_t i) const { return get<Device>(v_, i, "a device"); }
std::optional<Device> Args::opt_device(size_t i) const {
  return is_none(i) ? std::nullopt : std::optional<Device>(device(i));
}

}  // namespace coil
