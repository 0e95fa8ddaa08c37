// Lowerings of the reductions: each becomes a Reduction buffer over the reduced dims.
#include <coil/error.h>

#include <algorithm>
#include <initializer_list>
#include <string>

#include "graph/dims.h"
#include "heuristics/heuristics.h"
#include "lower/context.h"

namespace coil::lower {

namespace {

using ir::Op;
using ir::ReduceKind;
using V = ir::ValueNode;
using Result = std::optional<std::vector<TensorBox>>;

// Whether a reduction to `values` of `numel` elements each (hints) is worth splitting (Inductor's
// split reductions: partial results over P contiguous pieces of each value's elements, then each
// value's P partials reduced to it), as the device says.
bool worth_splitting(Context& cx, int64_t values, int64_t numel) {
  return heuristics::for_device(cx.program().device).split_reduction(values, numel);
}

// A reduction of `c`'s body over `count` of each value's elements, from `first` on, into a new
// buffer over `ranges`; `values` gives c's value vars in terms of the new vars, and `first` the
// piece's first element (both given the new vars). Its name.
template <typename Values, typename First>
std::string partial_reduction(Context& cx, const ir::Computation& c, SymShape ranges,
                              sym::Expr count, Values values, First first) {
  ir::Computation part;
  part.ranges = std::move(ranges);
  part.vars = Context::vars(part.ranges, "i");
  sym::Bindings bind = values(part.vars);
  part.reduction_ranges = {count};
  part.rvars = Context::vars(part.reduction_ranges, "j");
  std::vector<sym::Expr> original =
      ir::unravel(first(part.vars) + part.rvars[0], c.reduction_ranges);
  for (size_t k = 0; k < c.rvars.size(); ++k) bind[c.rvars[k]] = original[k];
  part.body = ir::substitute(c.body, bind);
  part.reduce = c.reduce;
  part.dtype = c.dtype;
  ir::Buffer b;
  b.kind = ir::BufferKind::Computed;
  b.layout = ir::Layout::contiguous(c.dtype, part.ranges);
  b.compute = std::move(part);
  return cx.add_buffer(std::move(b));
}

// Whether partial results of a `kind` reduction combine with the same reduction (Welford's
// variance and argmax/argmin do not: their state is more than a value).
bool combines_partials(ReduceKind kind) {
  return kind == ReduceKind::Sum || kind == ReduceKind::Prod || kind == ReduceKind::Max ||
         kind == ReduceKind::Min || kind == ReduceKind::Any || kind == ReduceKind::All;
}

// How a split cuts each value's elements: `count` pieces, and with `ragged` a tail after them
// (the count's remainder, when it is known only at run time).
struct Pieces {
  int64_t count = 0;
  bool ragged = false;
};

// The first of `counts` that divides `numel` at any size and leaves pieces of at least `min_len`
// at the hints (0: none).
int64_t exact_pieces(Context& cx, const sym::Expr& numel, const std::vector<int64_t>& counts,
                     int64_t min_len) {
  const int64_t at_hint = cx.program().hint(numel);
  for (int64_t p : counts)
    if (sym::mod(numel, p)->is_const(0) && at_hint / p >= min_len) return p;
  return 0;
}

// Merges adjacent reduction dims k and k + 1 that every load of `c`'s body steps through as one
// (rvar k's stride range(k + 1) times rvar k + 1's: NCHW's H and W under a batch norm's
// statistics), so that a split, which unravels each element's flat index over the reduction's
// dims, divides once fewer per element for each merge (by a run-time divisor in a dynamic
// graph). The flat order is the same, so the pieces are too. An index value, or a load that
// reads the dims otherwise, keeps them apart.
void merge_reduction_dims(ir::Computation& c) {
  for (size_t k = 0; k + 1 < c.rvars.size();) {
    const sym::Expr a = c.rvars[k], b = c.rvars[k + 1], inner = c.reduction_ranges[k + 1];
    const bool apart = ir::any_node(c.body, [&](const ir::ValueNode& n) {
      const bool uses =
          n.index() && (sym::depends_on(n.index(), a) || sym::depends_on(n.index(), b));
      if (!uses) return false;
      if (n.op() != Op::Load) return true;
      const sym::Expr sa = sym::stride(n.index(), a), sb = sym::stride(n.index(), b);
      return !sa || !sb || sym::depends_on(sa, b) || sym::depends_on(sb, a) ||
             !(sa - sb * inner)->is_const(0);
    });
    if (apart) {
      ++k;
      continue;
    }
    // m = a * range(k + 1) + b: each load reads m where it read b, with a at 0.
    const sym::Expr range = c.reduction_ranges[k] * inner;
    const sym::Expr m = Context::vars({range}, ("m" + std::to_string(k) + "_").c_str())[0];
    c.body = ir::substitute(c.body, {{a, sym::constant(0)}, {b, m}});
    c.rvars[k] = m;
    c.reduction_ranges[k] = range;
    c.rvars.erase(c.rvars.begin() + static_cast<std::ptrdiff_t>(k) + 1);
    c.reduction_ranges.erase(c.reduction_ranges.begin() + static_cast<std::ptrdiff_t>(k) + 1);
  }
}

// Makes `c` the final reduction of a split of its elements into `pieces` of `len` each: element
// j of a value is its partial j (read by `partial`, given j clamped to the pieces) and, when the
// split is ragged, the elements after the pieces follow, read by c's own body. Both sides of
// the select are evaluated: each index is clamped into its buffer.
void reduce_partials(ir::Computation& c, Pieces pieces, const sym::Expr& len,
                     const std::function<ir::Value(const sym::Expr&)>& partial) {
  const sym::Expr numel = sym_numel(c.reduction_ranges);
  const sym::Expr count = sym::constant(pieces.count);
  const ir::Value tail = c.body;
  const SymShape original_ranges = c.reduction_ranges;
  const std::vector<sym::Expr> original_rvars = c.rvars;
  c.reduction_ranges = {pieces.ragged ? count + sym::mod(numel, pieces.count) : count};
  c.rvars = Context::vars(c.reduction_ranges, "j");
  const sym::Expr j = c.rvars[0];
  c.body = partial(pieces.ragged ? sym::min(j, count - 1) : j);
  if (!pieces.ragged) return;
  const sym::Expr element =
      sym::min(len * count + sym::max(j - count, sym::constant(0)), numel - 1);
  const std::vector<sym::Expr> tail_rvars = ir::unravel(element, original_ranges);
  sym::Bindings bind;
  for (size_t k = 0; k < original_rvars.size(); ++k) bind[original_rvars[k]] = tail_rvars[k];
  c.body = V::where(V::binary(Op::Lt, V::index_value(j), size_value(count, kInt64)), c.body,
                    ir::substitute(tail, bind));
}

// A full reduction over rows of a long last dim (a loss summed over a layer norm's output) is
// split at those rows, from 16 to 8192 of them of 512 elements or more: its partials are then a
// row reduction over the rows of whatever made its input, which fuses into that kernel (the
// loss's squares summed in the layer norm's own row kernel, as Inductor's persistent reductions
// do) where pieces of several rows each would read the input again in a kernel of their own,
// and need the layer norm's statistics from a kernel before it. The row count (0: not so).
int64_t row_pieces(Context& cx, const ir::Computation& c) {
  const sym::Expr numel = sym_numel(c.reduction_ranges);
  if (c.reduction_ranges.size() < 2 || !numel->is_const() ||
      cx.program().hint(sym_numel(c.ranges)) != 1)
    return 0;
  const sym::Expr last = c.reduction_ranges.back();
  if (!last->is_const() || cx.program().hint(last) < 512) return 0;
  const int64_t rows = cx.program().hint(numel) / cx.program().hint(last);
  return rows >= 16 && rows <= 8192 ? rows : 0;
}

// Rewrites `c`, a reduction to a few values, as a reduction over a new buffer of partials,
// when each value has enough elements and its kind combines partials with itself. A static
// count is cut into pieces that divide it, and so is a count known only at run time that the
// pieces divide at any size. Another count known only at run time (large at the hints) is cut
// into 256 pieces of n / 256 (rounded down) and a tail of the n % 256 elements after
// them, which the final reduction reads itself after the partials: no loop of the partials'
// kernel masks its reads (a masked, clamped read in every iteration kept the loop from
// vectorising: 9x slower than the static split on 2 cores), there are as many kernels as in the
// static split (a kernel of its own for the tail, empty at most sizes, cost a parallel region
// per call), and sizes below 256 leave the pieces empty and the tail whole. The partials are
// laid out as the values with one more, innermost dim: the piece.
void split_reduction(Context& cx, ir::Computation& c) {
  const sym::Expr numel = sym_numel(c.reduction_ranges);
  if (!combines_partials(*c.reduce) ||
      !worth_splitting(cx, cx.program().hint(sym_numel(c.ranges)), cx.program().hint(numel)))
    return;
  // A count known only at run time may still be a multiple of the pieces whatever the sizes
  // (256 * s0: a full reduction over rows of 256): then no tail.
  Pieces pieces{row_pieces(cx, c), false};
  if (pieces.count == 0) pieces = {exact_pieces(cx, numel, {256, 128, 64, 32, 16}, 512), false};
  if (pieces.count == 0 && !numel->is_const()) pieces = {256, true};
  if (pieces.count == 0) return;
  merge_reduction_dims(c);
  const sym::Expr len = sym::floordiv(numel, pieces.count);
  // Piece p of a value reduces elements [p * len, (p + 1) * len) of its flattened reduction
  // (the tail [pieces * len, n)). The values' dims of size 1 are left out (a full reduction's
  // partials are a row).
  std::vector<sym::Expr> kept;  // the values' vars of dims above 1
  SymShape kept_ranges;
  sym::Bindings at;
  for (size_t k = 0; k < c.vars.size(); ++k) {
    if (c.ranges[k]->is_const(1)) {
      at[c.vars[k]] = sym::constant(0);
    } else {
      kept.push_back(c.vars[k]);
      kept_ranges.push_back(c.ranges[k]);
    }
  }
  auto values = [&](const std::vector<sym::Expr>& vars) {
    sym::Bindings bind = at;
    for (size_t k = 0; k < kept.size(); ++k) bind[kept[k]] = vars[k];
    return bind;
  };
  SymShape piece_ranges = kept_ranges;
  piece_ranges.push_back(sym::constant(pieces.count));
  const std::string partials =
      partial_reduction(cx, c, piece_ranges, len, values,
                        [&](const std::vector<sym::Expr>& v) { return v.back() * len; });
  // Value v's partial p: the partials' row of v, element p.
  reduce_partials(c, pieces, len, [&](const sym::Expr& p) {
    std::vector<sym::Expr> index = kept;
    index.push_back(p);
    return V::load(partials, c.dtype, ir::Layout::contiguous(c.dtype, piece_ranges).address(index));
  });
}

// Whether more of `c`'s loads step by one element with its last value var (mostly: a cat's
// parts, heads laid out apart) than with its last reduction var: consecutive values side by
// side, each value's elements apart. A load the same for every value (a row's mean, read by
// every column of a layer norm's weight gradient) counts neither way.
bool reads_down_columns(Context& cx, const ir::Computation& c) {
  // The last value var over more than one value: keepdim's dims of one come after a batch
  // norm's channels.
  auto last = std::find_if(c.ranges.rbegin(), c.ranges.rend(),
                           [](const sym::Expr& r) { return !r->is_const(1); });
  if (last == c.ranges.rend() || c.rvars.empty()) return false;
  const sym::Expr column = c.vars[static_cast<size_t>(c.ranges.rend() - last) - 1];
  std::vector<sym::Expr> others = c.rvars;
  for (const sym::Expr& v : c.vars)
    if (v != column) others.push_back(v);
  int across = 0, along = 0;
  ir::for_each_load(c.body, [&](const ir::ValueNode& load) {
    if (load.is_indirect()) return;
    const bool per_value = std::any_of(c.vars.begin(), c.vars.end(), [&](const sym::Expr& v) {
      return sym::depends_on(load.index(), v);
    });
    if (!per_value) return;
    across += ir::mostly_steps_by_one(cx.program(), load.index(), column, others);
    along += sym::steps_by_one(load.index(), c.rvars.back());
  });
  return across > along;
}

// How `c`'s rows are split when it reduces down columns (a count of 0: not), as the device cuts
// columns; by the hints when the rows' count is known only at run time (then with a tail,
// unless the pieces divide it at any size). Whatever its kind: a variance asks before choosing
// two passes of sums (lower_var).
Pieces column_pieces(Context& cx, const ir::Computation& c) {
  if (!reads_down_columns(cx, c)) return {};
  const sym::Expr numel = sym_numel(c.reduction_ranges);
  const int64_t n = cx.program().hint(numel);
  const int64_t values = cx.program().hint(sym_numel(c.ranges));
  const heuristics::ColumnSplit split =
      heuristics::for_device(cx.program().device).column_split(values, n);
  if (split.pieces.empty()) return {};
  if (int64_t exact = exact_pieces(cx, numel, split.pieces, split.min_rows)) return {exact, false};
  if (numel->is_const()) return {};
  for (int64_t p : split.pieces)
    if (n / p >= split.min_rows) return {p, true};
  return {};
}

// Rewrites `c`, a reduction down columns that column_pieces splits, as a reduction over
// partials laid out piece-major, [pieces, values...]: the partials' kernel then reads
// consecutive elements for consecutive outputs (the CUDA backend gives it 32 columns a block;
// the CPU's column kernel shares pieces and chunks among threads), and so does the final
// reduction of each value's pieces (and of a ragged split's tail rows).
void split_columns(Context& cx, ir::Computation& c) {
  if (!combines_partials(*c.reduce)) return;
  const Pieces pieces = column_pieces(cx, c);
  if (pieces.count == 0) return;
  merge_reduction_dims(c);
  const sym::Expr len = sym::floordiv(sym_numel(c.reduction_ranges), pieces.count);
  SymShape ranges = {sym::constant(pieces.count)};
  ranges.insert(ranges.end(), c.ranges.begin(), c.ranges.end());
  const std::string partials = partial_reduction(
      cx, c, ranges, len,
      [&](const std::vector<sym::Expr>& vars) {
        sym::Bindings bind;
        for (size_t k = 0; k < c.vars.size(); ++k) bind[c.vars[k]] = vars[k + 1];
        return bind;
      },
      [&](const std::vector<sym::Expr>& vars) { return vars[0] * len; });
  // Value v's partial p: element p of the partials' column of v.
  reduce_partials(c, pieces, len, [&](const sym::Expr& p) {
    std::vector<sym::Expr> index = {p};
    index.insert(index.end(), c.vars.begin(), c.vars.end());
    return V::load(partials, c.dtype, ir::Layout::contiguous(c.dtype, ranges).address(index));
  });
}

// The reduction of `x` over `dims` (all dims when empty) to the node's output shape, not yet
// split; body(v, value) turns the loaded element into what is accumulated for the output
// element at index `value`.
ir::Computation reduction(Context& cx, const Node& n, Node* x, Shape dims, bool keepdim,
                          ReduceKind kind, DType dtype,
                          const std::function<ir::Value(ir::Value, const Index&)>& body) {
  const SymShape in = cx.box(x).sizes;
  int64_t ndim = static_cast<int64_t>(in.size());
  if (dims.empty())
    for (int64_t d = 0; d < ndim; ++d) dims.push_back(d);
  dims = wrap_dims(dims, ndim, op_name(n.op()));
  std::vector<bool> reduced(in.size(), false);
  SymShape rsizes;
  for (int64_t d = 0; d < ndim; ++d)
    if (std::find(dims.begin(), dims.end(), d) != dims.end()) reduced[d] = true;
  for (int64_t d = 0; d < ndim; ++d)
    if (reduced[d]) rsizes.push_back(in[d]);

  ir::Computation c;
  c.ranges = n.sym_layout().sizes;
  c.vars = Context::vars(c.ranges, "i");
  c.reduction_ranges = rsizes;
  c.rvars = Context::vars(rsizes, "j");
  Index idx;
  size_t out_k = 0, r_k = 0;
  for (int64_t d = 0; d < ndim; ++d) {
    if (reduced[d]) {
      idx.push_back(c.rvars[r_k++]);
      if (keepdim) ++out_k;
    } else {
      idx.push_back(c.vars[out_k++]);
    }
  }
  c.body = body(cx.box(x).load(idx), c.vars);
  c.reduce = kind;
  c.dtype = dtype;
  return c;
}

// That reduction, split where it pays, in a new buffer.
TensorBox reduce(Context& cx, const Node& n, Node* x, Shape dims, bool keepdim, ReduceKind kind,
                 DType dtype, const std::function<ir::Value(ir::Value, const Index&)>& body) {
  ir::Computation c = reduction(cx, n, x, std::move(dims), keepdim, kind, dtype, body);
  // A split of each value's elements into pieces of consecutive ones would read a column's
  // pieces a stride apart, one element per sector (a channels-last batch norm's statistics):
  // columns are cut across their rows instead, each piece still read down the columns.
  if (reads_down_columns(cx, c))
    split_columns(cx, c);
  else
    split_reduction(cx, c);
  ir::Buffer b;
  b.kind = ir::BufferKind::Computed;
  b.layout = ir::Layout::contiguous(dtype, c.ranges);
  b.compute = std::move(c);
  ir::Layout layout = b.layout;
  return cx.from_storage(ir::TensorRef{cx.add_buffer(std::move(b)), layout});
}

Shape dims_arg(const Node& n) { return std::get<Shape>(n.args()[1]); }
Node* self_arg(const Node& n) { return std::get<Node*>(n.args()[0]); }

// Accumulation happens in float32 for the 16-bit floats, in the result dtype otherwise.
DType acc_dtype(DType t) { return is_reduced_float(t) ? kFloat32 : t; }

// sum, prod, amax, amin, any, all: (self, dim, keepdim, ...).
Result lower_simple(Context& cx, const Node& n, std::string*) {
  static const std::unordered_map<OpId, ReduceKind> kinds = {
      {OpId::sum, ReduceKind::Sum},  {OpId::prod, ReduceKind::Prod}, {OpId::amax, ReduceKind::Max},
      {OpId::amin, ReduceKind::Min}, {OpId::any, ReduceKind::Any},   {OpId::all, ReduceKind::All}};
  ReduceKind kind = kinds.at(n.op());
  DType out = n.tensor_meta().dtype;
  DType acc = acc_dtype(out);
  bool keepdim = std::get<bool>(n.args()[2]);
  TensorBox r = reduce(cx, n, self_arg(n), dims_arg(n), keepdim, kind, acc,
                       [acc](ir::Value v, const Index&) { return V::cast(v, acc); });
  if (acc == out) return std::vector<TensorBox>{r};
  return std::vector<TensorBox>{Context::memoized(
      out, r.sizes, [r, out](const Index& i) { return V::cast(r.load(i), out); })};
}

Result lower_arg_reduce(Context& cx, const Node& n, std::string*) {
  auto dim = std::get_if<int64_t>(&n.args()[1]);
  bool keepdim = std::get<bool>(n.args()[2]);
  Node* x = self_arg(n);
  if (!dim && keepdim) return std::nullopt;  // all dims kept as size 1: rare, eager handles it
  ReduceKind kind = n.op() == OpId::argmax ? ReduceKind::ArgMax : ReduceKind::ArgMin;
  DType in = acc_dtype(x->tensor_meta().dtype);
  Shape dims = dim ? Shape{*dim} : Shape{};
  return std::vector<TensorBox>{reduce(cx, n, x, dims, keepdim, kind, kInt64,
                                       [in](ir::Value v, const Index&) { return V::cast(v, in); })};
}

// var: the sum of squared deviations, divided by (count - correction) afterwards. Welford's
// one pass, but where the reduction would be split (columns cut across their rows, as a
// channels-last batch norm's statistics; few long rows on the GPU, channels-first): Welford's
// state does not combine as partials, so two passes, each a sum that splits, the mean's and
// then the squared deviations' from it (as exact as Welford's).
Result lower_var(Context& cx, const Node& n, std::string*) {
  Node* x = self_arg(n);
  DType out = n.tensor_meta().dtype;
  DType acc = acc_dtype(out);
  double correction = std::get<double>(n.args()[2]);
  bool keepdim = std::get<bool>(n.args()[3]);
  Shape dims = dims_arg(n);
  const SymShape in = cx.box(x).sizes;
  sym::Expr count = sym::constant(1);
  if (dims.empty()) {
    count = sym_numel(in);
  } else {
    for (int64_t d : wrap_dims(dims, static_cast<int64_t>(in.size()), "var")) count = count * in[d];
  }
  auto cast = [acc](ir::Value v, const Index&) { return V::cast(v, acc); };
  TensorBox m2;
  const ir::Computation welford =
      reduction(cx, n, x, dims, keepdim, ReduceKind::WelfordM2, acc, cast);
  const bool splits = column_pieces(cx, welford).count > 0 ||
                      (heuristics::for_device(cx.program().device).variance_split() ==
                           heuristics::VarianceSplit::AsSplitReduction &&
                       !reads_down_columns(cx, welford) &&
                       worth_splitting(cx, cx.program().hint(sym_numel(n.sym_layout().sizes)),
                                       cx.program().hint(count)));
  if (splits) {
    const TensorBox sum = reduce(cx, n, x, dims, keepdim, ReduceKind::Sum, acc, cast);
    const ir::Value c = size_value(count, acc);
    m2 =
        reduce(cx, n, x, dims, keepdim, ReduceKind::Sum, acc, [&](ir::Value v, const Index& value) {
          ir::Value d = V::binary(Op::Sub, V::cast(v, acc), V::binary(Op::Div, sum.load(value), c));
          return V::binary(Op::Mul, d, d);
        });
  } else {
    m2 = reduce(cx, n, x, dims, keepdim, ReduceKind::WelfordM2, acc, cast);
  }
  // max(count - correction, 0), as eager: a number when the count is one.
  ir::Value denom;
  if (count->is_const()) {
    denom = V::make_constant(std::max(0.0, static_cast<double>(count->value()) - correction), acc);
  } else {
    ir::Value c = V::binary(Op::Sub, size_value(count, acc), V::make_constant(correction, acc));
    denom = V::binary(Op::Maximum, c, V::make_constant(0.0, acc));
  }
  return std::vector<TensorBox>{Context::memoized(out, m2.sizes, [m2, out, denom](const Index& i) {
    return V::cast(V::binary(Op::Div, m2.load(i), denom), out);
  })};
}

}  // namespace

void register_reductions(std::unordered_map<OpId, Lowering>& t) {
  for (OpId op : {OpId::sum, OpId::prod, OpId::amax, OpId::amin, OpId::any, OpId::all})
    t[op] = lower_simple;
  t[OpId::argmax] = lower_arg_reduce;
  t[OpId::argmin] = lower_arg_reduce;
  t[OpId::var] = lower_var;
}

}  // namespace coil::lower
