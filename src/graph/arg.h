// The boxed arguments of an op call: what the dispatcher, meta functions, kernels, graph
// nodes, printer and parser all pass around.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <coil/tensor.h>

#include "sym/expr.h"

namespace coil {

// An int argument, or an int list, that depends on sizes known only at run time (from
// Tensor::sym_size during capture of a dynamic graph): the value at capture, which meta
// functions and kernels read as a plain int, and the expression the graph keeps.
struct SymIntArg {
  int64_t hint;
  sym::Expr expr;
  bool operator==(const SymIntArg&) const = default;
};
struct SymIntsArg {
  Shape hints;
  std::vector<sym::Expr> exprs;
  bool operator==(const SymIntsArg&) const = default;
};

// monostate is None.
using Arg = std::variant<std::monostate, Tensor, std::vector<Tensor>, Scalar, int64_t, double, bool,
                         Shape, DType, std::string, Device, SymIntArg, SymIntsArg>;

// Read access to an op's arguments, by position in its schema. A mismatch between what the
// schema promises and what is there is a coil bug (InternalError); user-facing checks live in
// the meta functions.
class Args {
 public:
  explicit Args(const std::vector<Arg>& v) : v_(v) {}
  size_t size() const { return v_.size(); }
  const Arg& operator[](size_t i) const { return v_.at(i); }
  const std::vector<Arg>& all() const { return v_; }

  bool is_none(size_t i) const { return std::holds_alternative<std::monostate>(v_.at(i)); }
  bool is_tensor(size_t i) const { return std::holds_alternative<Tensor>(v_.at(i)); }
  const Tensor& tensor(size_t i) const;
  Tensor opt_tensor(size_t i) const;  // undefined when None
  const std::vector<Tensor>& tensors(size_t i) const;
  Scalar scalar(size_t i) const;  // also reads int64/double/bool
  std::optional<Scalar> opt_scalar(size_t i) const;
  int64_t i64(size_t i) const;
  std::optional<int64_t> opt_i64(size_t i) const;
  const Shape& ints(size_t i) const;
  std::optional<Shape> opt_ints(size_t i) const;
  double f64(size_t i) const;  // also reads an int
  std::optional<double> opt_f64(size_t i) const;
  bool b(size_t i) const;
  DType dtype(size_t i) const;
  std::optional<DType> opt_dtype(size_t i) const;
  const std::string& str(size_t i) const;
  std::optional<std::string> opt_str(size_t i) const;
  Device device(size_t i) const;
  std::optional<Device> opt_device(size_t i) const;

 private:
  const std::vector<Arg>& v_;
};

// Converters for building argument lists from C++ values.
inline Arg none_or(const std::optional<int64_t>& v) { return v ? Arg(*v) : Arg(); }
inline Arg none_or(const std::optional<double>& v) { return v ? Arg(*v) : Arg(); }
inline Arg none_or(const std::optional<Scalar>& v) { return v ? Arg(*v) : Arg(); }
inline Arg none_or(const std::optional<DType>& v) { return v ? Arg(*v) : Arg(); }
inline Arg none_or(const std::optional<std::string>& v) { return v ? Arg(*v) : Arg(); }
inline Arg none_or(const std::optional<Shape>& v) { return v ? Arg(*v) : Arg(); }
inline Arg none_or(const Tensor& t) { return t.defined() ? Arg(t) : Arg(); }

}  // namespace coil
