// Max pooling as pointwise values, where the device's heuristics ask for it. The forward: each
// output element the largest of its window's elements (NaN where one is NaN, as PyTorch's
// kernel), positions of the window outside the input counting as -inf. Realized in the layout
// eager gives the result (channels-last after a channels-last input), its loops then read the
// input along its channels; the ReLU before it inlines. Windows past the input's end, which
// ceil_mode adds, are the same positions outside it. The backward: each input element the sum
// of the gradients of the windows it wins, in the input's layout, fused with the sum of the
// gradients that reach the pool and with the ReLU's gradient it feeds.
#include <array>
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

using Windows = std::array<Window, 2>;

// The window of a max pooling node whose input is args[self] (the forward's 0, the backward's
// 1: its gradient comes first), its kernel, stride, padding and dilation after it; nullopt, with
// why, where the op's eager kernel runs instead.
std::optional<Windows> window_of(const Node& n, size_t self, std::string* why_not) {
  const TensorMeta& m = n.tensor_meta();
  if (!heuristics::for_device(m.device).generated_max_pool()) {
    *why_not = "max pooling: this device's eager kernel";
    return std::nullopt;
  }
  const size_t rank = m.sizes.size();
  if (!is_floating(m.dtype) || (rank != 3 && rank != 4)) {
    *why_not = "max pooling of integers or of other ranks: the eager kernel";
    return std::nullopt;
  }
  Windows w;
  const std::vector<NodeArg>& a = n.args();
  for (size_t k = 0; k < 2; ++k) {
    const std::optional<int64_t> size = param(a[self + 1], k, std::nullopt);
    const std::optional<int64_t> stride = param(a[self + 2], k, size),
                                 pad = param(a[self + 3], k, 0), dil = param(a[self + 4], k, 1);
    if (!size || !stride || !pad || !dil) {
      *why_not = "max pooling with a window the lowering does not read: the eager kernel";
      return std::nullopt;
    }
    w[k] = {*size, *stride, *pad, *dil};
  }
  return w;
}

// Window `o` (output index, per spatial dim) of `in`: each tap's value (-inf outside the input)
// and whether it is inside, in the row-major order of the eager kernel's taps.
struct Taps {
  std::vector<ir::Value> values, inside;
};

Taps taps_of(const TensorBox& in, const Windows& w, const Index& i, sym::Expr oh, sym::Expr ow,
             DType dtype) {
  const ir::Value lowest = V::make_constant(-std::numeric_limits<double>::infinity(), dtype);
  const size_t hd = i.size() - 2, wd = i.size() - 1;
  Taps t;
  for (int64_t a = 0; a < w[0].k; ++a)
    for (int64_t b = 0; b < w[1].k; ++b) {
      const sym::Expr h = oh * w[0].stride - w[0].pad + a * w[0].dil;
      const sym::Expr x = ow * w[1].stride - w[1].pad + b * w[1].dil;
      Index j = i;
      j[hd] = clamp_into(h, in.sizes[hd]);
      j[wd] = clamp_into(x, in.sizes[wd]);
      t.inside.push_back(
          V::binary(ir::Op::LogicalAnd, in_range(h, in.sizes[hd]), in_range(x, in.sizes[wd])));
      t.values.push_back(V::where(t.inside.back(), in.load(j), lowest));
    }
  return t;
}

ir::Value largest(const Taps& t) {
  ir::Value best = t.values[0];
  for (size_t k = 1; k < t.values.size(); ++k) best = V::binary(ir::Op::Maximum, best, t.values[k]);
  return best;
}

Result lower_max_pool(Context& cx, const Node& n, std::string* why_not) {
  const std::optional<Windows> w = window_of(n, 0, why_not);
  if (!w) return std::nullopt;
  const TensorBox& in = cx.box(std::get<Node*>(n.args()[0]));
  const DType dtype = n.tensor_meta().dtype;
  return std::vector<TensorBox>{
      Context::memoized(dtype, n.sym_layout().sizes, [in, w = *w, dtype](const Index& i) {
        return largest(taps_of(in, w, i, i[i.size() - 2], i[i.size() - 1], dtype));
      })};
}

// The tap that wins a window, as the eager kernel picks it: the first inside the input holding
// the largest value (the first NaN where there is one); an int64 position in its taps' order.
ir::Value winner(const Taps& t) {
  const ir::Value best = largest(t);
  const ir::Value best_is_nan = V::unary(ir::Op::IsNan, best);
  ir::Value at = V::make_constant(static_cast<int64_t>(t.values.size()), kInt64);
  for (size_t k = t.values.size(); k-- > 0;) {
    const ir::Value v = t.values[k];
    const ir::Value same =
        V::binary(ir::Op::LogicalOr, V::binary(ir::Op::Eq, v, best),
                  V::binary(ir::Op::LogicalAnd, V::unary(ir::Op::IsNan, v), best_is_nan));
    at = V::where(V::binary(ir::Op::LogicalAnd, t.inside[k], same),
                  V::make_constant(static_cast<int64_t>(k), kInt64), at);
  }
  return at;
}

// max_pool2d_backward(grad, self, kernel, stride, padding, dilation, ceil_mode): the windows
// holding element (y, x) along a dim of stride s are o = (y + pad) // s - t for t below
// ceil(k / s), those inside the output whose span reaches y; each is summed, in the eager
// kernel's row-major order of windows, where the element is its winner. The windows' values are
// read again from the input (as the eager kernel does), not from indices the forward kept.
Result lower_max_pool_backward(Context& cx, const Node& n, std::string* why_not) {
  const std::optional<Windows> w = window_of(n, 1, why_not);
  if (!w) return std::nullopt;
  if ((*w)[0].dil != 1 || (*w)[1].dil != 1) {
    *why_not = "max pooling's backward with a dilation: the eager kernel";
    return std::nullopt;
  }
  const TensorBox &gy = cx.box(std::get<Node*>(n.args()[0])),
                  &in = cx.box(std::get<Node*>(n.args()[1]));
  const DType dtype = n.tensor_meta().dtype, acc = is_reduced_float(dtype) ? kFloat32 : dtype;
  return std::vector<TensorBox>{
      Context::memoized(dtype, n.sym_layout().sizes, [gy, in, w = *w, dtype, acc](const Index& i) {
        const size_t d[2] = {i.size() - 2, i.size() - 1};
        std::vector<sym::Expr> holding[2];  // each dim's candidate windows, in ascending order
        for (size_t k = 0; k < 2; ++k)
          for (int64_t t = (w[k].k + w[k].stride - 1) / w[k].stride; t-- > 0;)
            holding[k].push_back(sym::floordiv(i[d[k]] + w[k].pad, w[k].stride) - t);
        ir::Value sum = V::make_constant(0, acc);
        for (const sym::Expr& oh : holding[0])
          for (const sym::Expr& ow : holding[1]) {
            const sym::Expr a = i[d[0]] + w[0].pad - oh * w[0].stride,
                            b = i[d[1]] + w[1].pad - ow * w[1].stride;  // the element's tap
            ir::Value ok = V::binary(ir::Op::LogicalAnd, in_range(oh, gy.sizes[d[0]]),
                                     in_range(ow, gy.sizes[d[1]]));
            ok = V::binary(ir::Op::LogicalAnd, ok,
                           V::binary(ir::Op::LogicalAnd, in_range(a, sym::constant(w[0].k)),
                                     in_range(b, sym::constant(w[1].k))));
            const ir::Value wins = V::binary(ir::Op::Eq, winner(taps_of(in, w, i, oh, ow, dtype)),
                                             V::index_value(a * w[1].k + b));
            Index j = i;
            j[d[0]] = clamp_into(oh, gy.sizes[d[0]]);
            j[d[1]] = clamp_into(ow, gy.sizes[d[1]]);
            const ir::Value g = V::cast(gy.load(j), acc);
            sum = V::binary(
                ir::Op::Add, sum,
                V::where(V::binary(ir::Op::LogicalAnd, ok, wins), g, V::make_constant(0, acc)));
          }
        return V::cast(sum, dtype);
      })};
}

}  // namespace

void register_pools(std::unordered_map<OpId, Lowering>& t) {
  t[OpId::max_pool2d] = lower_max_pool;
  t[OpId::max_pool2d_backward] = lower_max_pool_backward;
}

}  // namespace coil::lower
