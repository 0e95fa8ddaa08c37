// Max pooling's forward as a pointwise value, where the device's heuristics ask for it: each
// output element the largest of its window's elements (NaN where one is NaN, as PyTorch's
// kernel), positions of the window outside the input counting as -inf. Realized in the layout
// eager gives the result (channels-last after a channels-last input), its loops then read the
// input along its channels; the ReLU before it inlines. Windows past the input's end, which
// ceil_mode adds, are the same positions outside it.
#include <limits>

#include "heuristics/heuristics.h"
#include "lower/context.h"

namespace coil::lower {

namespace {

using Result = std::optional<std::vector<TensorBox>>;
using V = ir::ValueNode;

// A window parameter for spatial dim k: one value for both dims, two, or (stride) none.
std::optional<int64_t> param(const NodeArg& a, size_t k, std::optional<int64_t> fallback) {
  const auto* v = std::get_if<Shape>(&a);
  if (!v) return std::nullopt;
  if (v->empty()) return fallback;
  return v->size() == 1 ? (*v)[0] : v->size() == 2 ? std::optional<int64_t>((*v)[k]) : std::nullopt;
}

struct Window {
  int64_t k, stride, pad, dil;
};

Result lower_max_pool(Context& cx, const Node& n, std::string* why_not) {
  const TensorMeta& m = n.tensor_meta();
  if (!heuristics::for_device(m.device).generated_max_pool()) {
    *why_not = "max pooling: this device's eager kernel";
    return std::nullopt;
  }
  const TensorBox& in = cx.box(std::get<Node*>(n.args()[0]));
  const size_t rank = in.sizes.size();
  if (!is_floating(m.dtype) || (rank != 3 && rank != 4)) {
    *why_not = "max pooling of integers or of other ranks: the eager kernel";
    return std::nullopt;
  }
  Window w[2];
  for (size_t k = 0; k < 2; ++k) {
    const std::optional<int64_t> size = param(n.args()[1], k, std::nullopt);
    const std::optional<int64_t> stride = param(n.args()[2], k, size),
                                 pad = param(n.args()[3], k, 0), dil = param(n.args()[4], k, 1);
    if (!size || !stride || !pad || !dil) {
      *why_not = "max pooling with a window the lowering does not read: the eager kernel";
      return std::nullopt;
    }
    w[k] = {*size, *stride, *pad, *dil};
  }
  const DType dtype = m.dtype;
  return std::vector<TensorBox>{
      Context::memoized(dtype, n.sym_layout().sizes, [in, w, rank, dtype](const Index& i) {
        const ir::Value lowest = V::make_constant(-std::numeric_limits<double>::infinity(), dtype);
        const size_t hd = rank - 2, wd = rank - 1;
        ir::Value best;
        for (int64_t a = 0; a < w[0].k; ++a)
          for (int64_t b = 0; b < w[1].k; ++b) {
            const sym::Expr h = i[hd] * w[0].stride - w[0].pad + a * w[0].dil;
            const sym::Expr x = i[wd] * w[1].stride - w[1].pad + b * w[1].dil;
            Index j = i;
            j[hd] = clamp_into(h, in.sizes[hd]);
            j[wd] = clamp_into(x, in.sizes[wd]);
            const ir::Value inside =
                V::binary(ir::Op::LogicalAnd, in_range(h, in.sizes[hd]), in_range(x, in.sizes[wd]));
            const ir::Value v = V::where(inside, in.load(j), lowest);
            best = best ? V::binary(ir::Op::Maximum, best, v) : v;
          }
        return best;
      })};
}

}  // namespace

void register_pools(std::unordered_map<OpId, Lowering>& t) { t[OpId::max_pool2d] = lower_max_pool; }

}  // namespace coil::lower
