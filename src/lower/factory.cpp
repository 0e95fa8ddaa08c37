// Lowerings of the deterministic factories: values computed from the index alone, so they
// fuse into their users and never touch memory. Random factories and linspace keep their
// eager kernels (the random stream and the exact rounding stay eager's).
#include "lower/context.h"

namespace coil::lower {

namespace {

using ir::Op;
using V = ir::ValueNode;
using Result = std::optional<std::vector<TensorBox>>;

Result box_of(const Node& n, Loader f) {
  return std::vector<TensorBox>{
      Context::memoized(n.tensor_meta().dtype, n.sym_layout().sizes, std::move(f))};
}

// The fill may be a size known only at run time (a mean's count over symbols).
Result lower_full(Context&, const Node& n, std::string*) {
  DType dtype = n.tensor_meta().dtype;
  if (auto* s = std::get_if<SymIntArg>(&n.args()[1])) {
    ir::Value v = size_value(s->expr, dtype);
    return box_of(n, [v](const Index&) { return v; });
  }
  Scalar fill = std::get<Scalar>(n.args()[1]);
  return box_of(n, [fill, dtype](const Index&) { return V::make_constant(fill, dtype); });
}

// As eager: start + i * step in int64 for integer results, in float64 otherwise.
Result lower_arange(Context&, const Node& n, std::string*) {
  Scalar start = std::get<Scalar>(n.args()[0]), step = std::get<Scalar>(n.args()[2]);
  DType dtype = n.tensor_meta().dtype;
  DType compute = is_floating(dtype) ? kFloat64 : kInt64;
  return box_of(n, [=](const Index& i) {
    ir::Value k = V::cast(V::index_value(i[0]), compute);
    ir::Value v = V::binary(Op::Add, V::make_constant(start, compute),
                            V::binary(Op::Mul, k, V::make_constant(step, compute)));
    return V::cast(v, dtype);
  });
}

Result lower_eye(Context&, const Node& n, std::string*) {
  DType dtype = n.tensor_meta().dtype;
  return box_of(n, [dtype](const Index& i) {
    ir::Value diagonal = V::binary(Op::Eq, V::index_value(i[0]), V::index_value(i[1]));
    return V::cast(diagonal, dtype);
  });
}

}  // namespace

void register_factories(std::unordered_map<OpId, Lowering>& t) {
  t[OpId::full] = lower_full;
  t[OpId::arange] = lower_arange;
  t[OpId::eye] = lower_eye;
}

}  // namespace coil::lower
