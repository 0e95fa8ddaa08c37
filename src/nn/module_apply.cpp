// nn::Module moves: to(dtype) and to(device) convert every tensor in place, keeping identity.
#include <coil/autograd.h>
#include <coil/nn/module.h>

#include "runtime/copy.h"
#include "runtime/tensor_impl.h"

namespace coil::nn {

namespace {

// Gives `t` the data and layout of `converted`: as PyTorch's `param.data = converted`, every
// handle to `t` (the module's members, an optimizer's list) sees the new values.
void rebind(const Tensor& t, const Tensor& converted) {
  if (converted.is_same(t)) return;
  t.impl()->storage = converted.impl()->storage;
  t.impl()->meta = converted.impl()->meta;
}

// Every distinct parameter and buffer of `m` and its descendants.
std::vector<Tensor> all_tensors(const Module& m) {
  std::vector<Tensor> out = m.parameters();
  for (const Tensor& b : m.buffers()) out.push_back(b);
  return out;
}

}  // namespace

Module& Module::to(DType dtype) {
  COIL_CHECK(is_floating(dtype), "nn::", name(), "::to: only floating-point dtypes are accepted, ",
             "got ", dtype_name(dtype),
             " (integer buffers keep their dtype; convert single tensors with Tensor::to)");
  for (const Tensor& t : all_tensors(*this)) {
    if (!t.is_floating_point() || t.dtype() == dtype) continue;
    rebind(t, to_dtype_copy(t, dtype));
    Tensor g = t.grad();
    if (g.defined() && g.dtype() != dtype) t.set_grad(to_dtype_copy(g, dtype));
  }
  return *this;
}

Module& Module::to(Device device) {
  for (const Tensor& t : all_tensors(*this)) {
    if (t.device() == device) continue;
    rebind(t, t.detach().to(device));
    Tensor g = t.grad();
    if (g.defined() && g.device() != device) t.set_grad(g.to(device));
  }
  return *this;
}

Module& Module::to(MemoryFormat format) {
  for (const Tensor& t : all_tensors(*this)) {
    if (t.dim() != 4 || t.is_contiguous(format)) continue;
    rebind(t, t.detach().contiguous(format));
    Tensor g = t.grad();
    if (g.defined() && !g.is_contiguous(format)) t.set_grad(g.contiguous(format));
  }
  return *this;
}

void Module::zero_grad(bool set_to_none) { autograd::zero_grad(parameters(), set_to_none); }

}  // namespace coil::nn
