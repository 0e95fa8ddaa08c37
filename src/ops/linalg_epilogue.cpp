// Matrix products with an epilogue fused in: the ops the post-grad pattern matcher rewrites
// `relu(addmm(...))` and the decomposed `gelu(addmm(...))` into
// (src/passes/post_grad_patterns.cpp), so the activation runs over the product while it is
// still in cache instead of in a second kernel over memory. oneDNN computes gelu inside its
// product kernel; relu, and every product oneDNN does not take, get a pass over the result
// (runtime/kernels/epilogue.h).
#include "graph/op_impl.h"
#include "ops/linalg_util.h"

namespace coil::ops {

// addmm's rules exactly: the epilogue changes values, never the shape or the dtype.
std::vector<TensorMeta> meta_addmm_relu(const Args& a) { return meta_addmm(a); }

std::vector<Tensor> eager_addmm_relu(const Args& a, const std::vector<TensorMeta>& out) {
  return one(addmm_with(a, out[0], Epilogue::relu));
}

std::vector<TensorMeta> meta_addmm_gelu(const Args& a) {
  const std::string& mode = a.str(3);
  COIL_CHECK(mode == "none" || mode == "tanh",
             "addmm_gelu: approximate must be \"none\" or \"tanh\", got \"", mode, "\"");
  std::vector<TensorMeta> out = meta_addmm(a);
  COIL_CHECK(is_floating(out[0].dtype), "addmm_gelu: gelu needs floating-point operands, got ",
             describe(a.tensor(1)), " and ", describe(a.tensor(2)),
             "; convert them with .to(float32)");
  return out;
}

std::vector<Tensor> eager_addmm_gelu(const Args& a, const std::vector<TensorMeta>& out) {
  return one(addmm_with(a, out[0], a.str(3) == "tanh" ? Epilogue::gelu_tanh : Epilogue::gelu_erf));
}

}  // namespace coil::ops
