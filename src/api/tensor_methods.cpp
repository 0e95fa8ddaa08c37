// coil::Tensor's op methods (views, math, in-place variants): thin forwards to the ops.
#include <coil/ops.h>

#include "autograd/record.h"
#include "graph/eager_destination.h"
#include "graph/registry.h"
#include "graph/sym_node.h"
#include "runtime/copy.h"
#include "runtime/loops.h"

namespace coil {

Tensor Tensor::view(const Shape& size) const { return call_op1(OpId::view, {*this, size}); }
Tensor Tensor::reshape(const Shape& shape) const { return call_op1(OpId::reshape, {*this, shape}); }
Tensor Tensor::permute(const Shape& dims) const { return call_op1(OpId::permute, {*this, dims}); }
Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  return call_op1(OpId::transpose, {*this, d0, d1});
}
Tensor Tensor::t() const { return call_op1(OpId::t, {*this}); }
Tensor Tensor::expand(const Shape& size) const { return call_op1(OpId::expand, {*this, size}); }
Tensor Tensor::squeeze() const { return call_op1(OpId::squeeze, {*this, Arg()}); }
Tensor Tensor::squeeze(int64_t dim) const { return call_op1(OpId::squeeze, {*this, Shape{dim}}); }
Tensor Tensor::unsqueeze(int64_t dim) const { return call_op1(OpId::unsqueeze, {*this, dim}); }
Tensor Tensor::slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
                     int64_t step) const {
  return call_op1(OpId::slice, {*this, dim, none_or(start), none_or(end), step});
}
SymInt Tensor::sym_numel() const {
  SymInt n = 1;
  for (const SymInt& s : sym_sizes()) n = n * s;
  return n;
}
Tensor Tensor::view_symint(const SymInts& size) const {
  return call_op1(OpId::view, {*this, symints_arg(size)});
}
Tensor Tensor::reshape_symint(const SymInts& shape) const {
  return call_op1(OpId::reshape, {*this, symints_arg(shape)});
}
Tensor Tensor::expand_symint(const SymInts& size) const {
  return call_op1(OpId::expand, {*this, symints_arg(size)});
}
Tensor Tensor::narrow_symint(int64_t dim, const SymInt& start, const SymInt& length) const {
  return call_op1(OpId::narrow, {*this, dim, symint_arg(start), symint_arg(length)});
}
Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  return call_op1(OpId::narrow, {*this, dim, start, length});
}
Tensor Tensor::select(int64_t dim, int64_t index) const {
  return call_op1(OpId::select, {*this, dim, index});
}
Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  return call_op1(OpId::flatten, {*this, start_dim, end_dim});
}
Tensor Tensor::unflatten(int64_t dim, const Shape& sizes) const {
  return call_op1(OpId::unflatten, {*this, dim, sizes});
}
Tensor Tensor::as_strided(const Shape& size, const Shape& stride,
                          std::optional<int64_t> storage_offset) const {
  return call_op1(OpId::as_strided, {*this, size, stride, none_or(storage_offset)});
}

Tensor Tensor::contiguous() const { return call_op1(OpId::contiguous, {*this}); }
// A channels-last copy is the contiguous copy of the NHWC view, seen as NCHW again: ops that
// capture and differentiate like any others.
Tensor Tensor::contiguous(MemoryFormat format) const {
  if (format == MemoryFormat::Contiguous) return contiguous();
  COIL_CHECK(dim() == 4,
             "contiguous(MemoryFormat::ChannelsLast): needs a 4-D [N, C, H, W] tensor, got ", dim(),
             "-D ", shape_str(sizes()), "; channels-last applies to images only");
  if (is_contiguous(format)) return *this;
  return permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
}
Tensor Tensor::clone() const { return call_op1(OpId::clone, {*this}); }
Tensor Tensor::to(DType dtype) const {
  return dtype == this->dtype() ? *this : call_op1(OpId::to_dtype, {*this, dtype});
}
Tensor Tensor::to(Device device, bool non_blocking) const {
  return device == this->device() ? *this
                                  : call_op1(OpId::to_device, {*this, device, non_blocking});
}
Tensor Tensor::cuda(int index, bool non_blocking) const {
  return to(Device(DeviceType::CUDA, index), non_blocking);
}
Tensor Tensor::cpu() const { return to(kCPU); }
Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->meta = impl_->meta;
  impl->proxy = impl_->proxy;
  return Tensor(std::move(impl));
}

Tensor Tensor::neg() const { return coil::neg(*this); }
Tensor Tensor::abs() const { return coil::abs(*this); }
Tensor Tensor::exp() const { return coil::exp(*this); }
Tensor Tensor::log() const { return coil::log(*this); }
Tensor Tensor::sqrt() const { return coil::sqrt(*this); }
Tensor Tensor::rsqrt() const { return coil::rsqrt(*this); }
Tensor Tensor::sin() const { return coil::sin(*this); }
Tensor Tensor::cos() const { return coil::cos(*this); }
Tensor Tensor::tanh() const { return coil::tanh(*this); }
Tensor Tensor::sigmoid() const { return coil::sigmoid(*this); }
Tensor Tensor::relu() const { return coil::relu(*this); }
Tensor Tensor::reciprocal() const { return coil::reciprocal(*this); }
Tensor Tensor::pow(const Scalar& e) const { return coil::pow(*this, e); }
Tensor Tensor::pow(const Tensor& e) const { return coil::pow(*this, e); }
Tensor Tensor::add(const Tensor& o) const { return coil::add(*this, o); }
Tensor Tensor::sub(const Tensor& o) const { return coil::sub(*this, o); }
Tensor Tensor::mul(const Tensor& o) const { return coil::mul(*this, o); }
Tensor Tensor::div(const Tensor& o) const { return coil::div(*this, o); }
Tensor Tensor::clamp(std::optional<Scalar> min, std::optional<Scalar> max) const {
  return coil::clamp(*this, min, max);
}
Tensor Tensor::matmul(const Tensor& o) const { return coil::matmul(*this, o); }
Tensor Tensor::mm(const Tensor& o) const { return coil::mm(*this, o); }

Tensor Tensor::sum(const Shape& d, bool k) const { return coil::sum(*this, d, k); }
Tensor Tensor::mean(const Shape& d, bool k) const { return coil::mean(*this, d, k); }
Tensor Tensor::prod(const Shape& d, bool k) const { return coil::prod(*this, d, k); }
Tensor Tensor::amax(const Shape& d, bool k) const { return coil::amax(*this, d, k); }
Tensor Tensor::amin(const Shape& d, bool k) const { return coil::amin(*this, d, k); }
Tensor Tensor::var(const Shape& d, double c, bool k) const { return coil::var(*this, d, c, k); }
Tensor Tensor::std(const Shape& d, double c, bool k) const { return coil::std(*this, d, c, k); }
Tensor Tensor::argmax(std::optional<int64_t> d, bool k) const { return coil::argmax(*this, d, k); }
Tensor Tensor::argmin(std::optional<int64_t> d, bool k) const { return coil::argmin(*this, d, k); }
Tensor Tensor::softmax(int64_t d) const { return coil::softmax(*this, d); }
Tensor Tensor::log_softmax(int64_t d) const { return coil::log_softmax(*this, d); }

void write_into(const Tensor& self, const Tensor& value);

// In-place ops compute out of place, then write the result back into this tensor's storage
// (the result must not change this tensor's shape or need a wider dtype).
namespace {
const Tensor& assign_result(const Tensor& self, const Tensor& result, const char* op) {
  COIL_CHECK(result.sizes() == self.sizes(), op, ": the result has sizes ",
             shape_str(result.sizes()), " but in-place ops cannot change ", shape_str(self.sizes()),
             "; broadcasting may only grow the other operand");
  COIL_CHECK(promote_types(result.dtype(), self.dtype()) == self.dtype() ||
                 (is_floating(self.dtype()) && is_floating(result.dtype())),
             op, ": the result type ", dtype_name(result.dtype()), " cannot be stored in a ",
             dtype_name(self.dtype()), " tensor; use the out-of-place op");
  write_into(self, result);
  return self;
}
}  // namespace

// While capturing, an in-place write is recorded (functionalised) instead of performed.
// Autograd learns of it too: `self` takes over the history of `value`.
void write_into(const Tensor& self, const Tensor& value) {
  autograd::rebase_history(self, value, "in-place update");
  if (DispatchHook* hook = current_dispatch_hook()) {
    hook->assign(self, value);
  } else {
    // An eager kernel that took self as its destination (EagerDestination) wrote it already.
    if (value.impl()->storage != self.impl()->storage || value.impl()->meta != self.impl()->meta)
      copy_into(self, value);
    ++self.impl()->storage->version;
  }
}

const Tensor& Tensor::copy_(const Tensor& src) const {
  if (current_dispatch_hook() || autograd::should_record({*this, src})) {
    broadcast_shapes(sizes(), src.sizes(), "copy_");
    write_into(*this, src.to(dtype()).expand(sizes()));
  } else {
    copy_into(*this, src);
    ++impl_->storage->version;
  }
  return *this;
}
const Tensor& Tensor::fill_(const Scalar& value) const {
  if (current_dispatch_hook() || autograd::should_record({*this})) {
    write_into(*this, full(sizes(), value, dtype(), device()));
  } else {
    fill(*this, value);
    ++impl_->storage->version;
  }
  return *this;
}
// What an in-place op whose derivative reads `self` computes from: under autograd, a copy of
// its old value (the write is about to replace it, and the rule would find it changed), as
// PyTorch saves original_self.
namespace {
Tensor old_value(const Tensor& self, const Tensor& other) {
  return autograd::should_record({self, other}) ? self.clone() : self;
}

// An in-place method whose new value `value()` computes with the one op `op`. On the GPU,
// outside capture and autograd, that op's kernel is offered `self` to write into, and the
// copy of assign_result then finds the value already there.
template <typename Value>
const Tensor& in_place(const Tensor& self, OpId op, const char* name, const Tensor& other,
                       Value value) {
  Tensor result;
  {
    std::optional<EagerDestination> offer;
    std::vector<Arg> operands = {self};
    if (other.defined()) operands.emplace_back(other);
    if (self.device().is_cuda() && !current_dispatch_hook() && !autograd::should_record(operands))
      offer.emplace(op, self);
    result = value();
  }
  return assign_result(self, result, name);
}
}  // namespace

const Tensor& Tensor::add_(const Tensor& o) const {
  return in_place(*this, OpId::add, "add_", o, [&] { return coil::add(*this, o); });
}
const Tensor& Tensor::sub_(const Tensor& o) const {
  return in_place(*this, OpId::sub, "sub_", o, [&] { return coil::sub(*this, o); });
}
const Tensor& Tensor::mul_(const Tensor& o) const {
  return in_place(*this, OpId::mul, "mul_", o, [&] { return coil::mul(old_value(*this, o), o); });
}
const Tensor& Tensor::div_(const Tensor& o) const {
  return in_place(*this, OpId::div, "div_", o, [&] { return coil::div(old_value(*this, o), o); });
}
const Tensor& Tensor::add_(const Scalar& o) const {
  return in_place(*this, OpId::add, "add_", Tensor(), [&] { return coil::add(*this, o); });
}
const Tensor& Tensor::sub_(const Scalar& o) const {
  return in_place(*this, OpId::sub, "sub_", Tensor(), [&] { return coil::sub(*this, o); });
}
const Tensor& Tensor::mul_(const Scalar& o) const {
  return in_place(*this, OpId::mul, "mul_", Tensor(), [&] { return coil::mul(*this, o); });
}
const Tensor& Tensor::div_(const Scalar& o) const {
  return in_place(*this, OpId::div, "div_", Tensor(), [&] { return coil::div(*this, o); });
}
const Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) const {
  return in_place(*this, OpId::clamp, "clamp_", Tensor(),
                  [&] { return coil::clamp(*this, min, max); });
}
const Tensor& Tensor::relu_() const {
  return in_place(*this, OpId::relu, "relu_", Tensor(), [&] { return coil::relu(*this); });
}

}  // namespace coil
