// Matrix products with an epilogue fused in: the ops the post-grad pattern matcher rewrites
// `relu(addmm(...))` into (src/passes/post_grad_patterns.cpp), so the activation runs over the
// product while it is still in cache instead of in a second kernel over memory.
#include "graph/op_impl.h"
#include "ops/meta_util.h"
#include "runtime/dispatch_dtype.h"
#include "runtime/loops.h"

namespace coil::ops {

// addmm's rules exactly: the epilogue changes values, never the shape or the dtype.
std::vector<TensorMeta> meta_addmm_relu(const Args& a) { return meta_addmm(a); }

std::vector<Tensor> eager_addmm_relu(const Args& a, const std::vector<TensorMeta>& out) {
  Tensor r = std::move(eager_addmm(a, out).at(0));
  dispatch_dtype(r.dtype(), [&]<typename T>() {
    T* p = r.data_ptr<T>();
    for_each_row<1>(r.sizes(), {r.strides()},
                    [&](std::array<int64_t, 1> off, int64_t n, std::array<int64_t, 1> step) {
                      T* row = p + off[0];
                      for (int64_t i = 0; i < n; ++i) {
                        T& v = row[i * step[0]];
                        // As relu: NaN and -0.0 pass through.
                        if (static_cast<acc_type<T>>(v) < acc_type<T>(0)) v = T(0);
                      }
                    });
  });
  return one(r);
}

}  // namespace coil::ops
