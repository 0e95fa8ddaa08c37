#include "graph/sym_rules.h"

#include <algorithm>
#include <unordered_map>

#include <coil/error.h>

#include "graph/dims.h"

namespace coil {

using sym::Expr;

sym::Expr sym_int_arg(const NodeArg& a) {
  if (auto* s = std::get_if<SymIntArg>(&a)) return s->expr;
  if (auto* i = std::get_if<int64_t>(&a)) return sym::constant(*i);
  if (auto* b = std::get_if<bool>(&a)) return sym::constant(*b);
  if (auto* s = std::get_if<Scalar>(&a)) {
    COIL_ASSERT(!s->is_floating(), "a floating-point number where a size is expected: ", s->str());
    return sym::constant(s->to_int());
  }
  throw InternalError("symbolic shapes: an argument that is not an int");
}

SymShape sym_ints_arg(const NodeArg& a) {
  if (auto* s = std::get_if<SymIntsArg>(&a)) return s->exprs;
  if (auto* s = std::get_if<Shape>(&a)) return sym_constants(*s);
  throw InternalError("symbolic shapes: an argument that is not an int list");
}

namespace detail_sym {

bool SymCall::is_tensor(size_t i) const { return std::holds_alternative<Node*>(args_.at(i)); }
bool SymCall::has(size_t i) const { return !std::holds_alternative<std::monostate>(args_.at(i)); }

SymLayout SymCall::layout(size_t i) const {
  SymLayout l = layout_of_(std::get<Node*>(args_.at(i)));
  if (env_) {
    l.sizes = env_->simplify(l.sizes);
    l.strides = env_->simplify(l.strides);
    l.offset = env_->simplify(l.offset);
  }
  return l;
}

SymShape SymCall::sizes(size_t i) const { return is_tensor(i) ? layout(i).sizes : SymShape{}; }

std::vector<SymLayout> SymCall::layouts(size_t i) const {
  std::vector<SymLayout> out;
  for (Node* n : std::get<std::vector<Node*>>(args_.at(i))) {
    SymLayout l = layout_of_(n);
    if (env_) l.sizes = env_->simplify(l.sizes), l.strides = env_->simplify(l.strides);
    out.push_back(std::move(l));
  }
  return out;
}

sym::Expr SymCall::int_arg(size_t i) const { return simplify(sym_int_arg(args_.at(i))); }

SymShape SymCall::ints(size_t i) const {
  SymShape s = sym_ints_arg(args_.at(i));
  return env_ ? env_->simplify(s) : s;
}

int64_t SymCall::plain_int(size_t i) const { return guard_int(int_arg(i)); }

int64_t SymCall::guard_int(Expr e) const {
  return e->is_const() ? e->value() : env_->guard_int(e, why() + ": a size it needs as a number");
}

int SymCall::arg_index(const char* name) const { return op_info(op_).schema.index_of(name); }

std::string SymCall::why() const { return op_name(op_); }

namespace {
void need_env(ShapeEnv* env, Expr a, Expr b, const char* what) {
  COIL_ASSERT(env, "symbolic shapes: ", what, " of ", sym::to_string(a), " and ", sym::to_string(b),
              " without a shape env");
}
}  // namespace

bool SymCall::eq(Expr a, Expr b) const {
  if (a->is_const() && b->is_const()) return a == b;
  need_env(env_, a, b, "eq");
  return env_->eq(a, b, why());
}
bool SymCall::lt(Expr a, Expr b) const {
  if (a->is_const() && b->is_const()) return a->value() < b->value();
  need_env(env_, a, b, "lt");
  return env_->lt(a, b, why());
}
bool SymCall::le(Expr a, Expr b) const {
  if (a->is_const() && b->is_const()) return a->value() <= b->value();
  need_env(env_, a, b, "le");
  return env_->le(a, b, why());
}
int64_t SymCall::hint(Expr e) const {
  if (e->is_const()) return e->value();
  COIL_ASSERT(env_, "symbolic shapes: the hint of ", sym::to_string(e), " without a shape env");
  return env_->hint(e);
}

SymLayout SymCall::result(SymShape sizes, size_t output) const {
  const TensorMeta& m = metas_.at(output);
  if (m.is_contiguous()) return SymLayout::contiguous(std::move(sizes));
  if (is_static(sizes)) return SymLayout::of(m);
  // Dense in another order (a permuted output): the dims by decreasing stride, each stride the
  // product of the sizes after it in that order.
  std::vector<size_t> order(sizes.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return m.strides[a] > m.strides[b]; });
  SymShape strides(sizes.size());
  Expr acc = sym::constant(1);
  for (size_t k = order.size(); k-- > 0;) {
    strides[order[k]] = acc;
    acc = acc * sizes[order[k]];
  }
  return SymLayout{std::move(sizes), std::move(strides), sym::constant(0)};
}

SymShape broadcast(const SymCall& c, const std::vector<SymShape>& shapes) {
  size_t nd = 0;
  for (const SymShape& s : shapes) nd = std::max(nd, s.size());
  SymShape out(nd, sym::constant(1));
  for (size_t k = 0; k < nd; ++k) {
    for (const SymShape& s : shapes) {
      if (s.size() + k < nd) continue;
      Expr e = s[s.size() - nd + k];
      if (e->is_const(1)) continue;
      if (out[k]->is_const(1)) {
        out[k] = e;
      } else {
        COIL_ASSERT(c.eq(out[k], e), c.why(), ": sizes ", sym::to_string(out[k]), " and ",
                    sym::to_string(e), " do not broadcast, yet the meta function agreed");
        out[k] = c.simplify(out[k]);
      }
    }
  }
  return out;
}

SymShape concat(SymShape a, const SymShape& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

SymShape leading(const SymShape& s, size_t drop) {
  return SymShape(s.begin(), s.end() - static_cast<std::ptrdiff_t>(std::min(drop, s.size())));
}

void eq_all(const SymCall& c, const SymShape& a, const SymShape& b) {
  for (size_t k = 0; k < a.size() && k < b.size(); ++k) c.eq(a[k], b[k]);
}

}  // namespace detail_sym

namespace {

using detail_sym::broadcast;
using detail_sym::concat;
using detail_sym::eq_all;
using detail_sym::leading;
using detail_sym::one;
using detail_sym::Rule;
using detail_sym::SymCall;
using Layouts = std::vector<SymLayout>;

// Every tensor argument broadcast (numbers are 0-dim).
Layouts pointwise(const SymCall& c) {
  if (c.op() == OpId::contiguous && c.metas()[0].offset != 0) return one(c.layout(0));
  std::vector<SymShape> shapes;
  for (size_t i = 0; i < c.args().size(); ++i)
    if (c.is_tensor(i)) shapes.push_back(c.sizes(i));
  return one(c.result(broadcast(c, shapes)));
}

Layouts same_as_input(const SymCall& c) { return one(c.result(c.sizes(0))); }

// layer_norm and rms_norm: normalized_shape is the input's trailing dims, and the weight's
// and bias's shape.
Layouts layer_norm(const SymCall& c) {
  SymShape x = c.sizes(0), norm = c.ints(1);
  eq_all(c, SymShape(x.end() - static_cast<std::ptrdiff_t>(norm.size()), x.end()), norm);
  for (size_t i : {size_t{2}, size_t{3}})
    if (i < c.args().size() && c.is_tensor(i)) eq_all(c, c.sizes(i), norm);
  return one(c.result(c.simplify(x)));
}

// batch_norm's and group_norm's per-channel tensors have the input's dim 1; group_norm's
// groups divide it.
Layouts channel_norm(const SymCall& c) {
  SymShape x = c.sizes(0);
  const bool group = c.op() == OpId::group_norm;
  if (group && x.size() > 1 && !x[1]->is_const()) {
    int64_t groups = c.plain_int(1);
    c.eq(sym::mod(x[1], groups), sym::constant(0));
  }
  for (size_t i = group ? 2 : 1; i < (group ? 4 : 5); ++i)
    if (c.is_tensor(i) && x.size() > 1) c.eq(c.sizes(i)[0], x[1]);
  return one(c.result(c.simplify(x)));
}

// The reductions: the reduced dims dropped, or kept as 1.
Layouts reduction(const SymCall& c) {
  SymShape in = c.sizes(0);
  const int64_t nd = static_cast<int64_t>(in.size());
  const int d = c.arg_index("dim"), k = c.arg_index("keepdim");
  Shape dims;
  if (c.has(static_cast<size_t>(d))) {
    const NodeArg& a = c.args()[static_cast<size_t>(d)];
    dims = std::holds_alternative<Shape>(a) ? std::get<Shape>(a)
                                            : Shape{c.plain_int(static_cast<size_t>(d))};
  }
  dims = wrap_dims(dims, nd, op_name(c.op()));
  const bool keepdim = std::get<bool>(c.args()[static_cast<size_t>(k)]);
  SymShape out;
  for (int64_t i = 0; i < nd; ++i) {
    bool reduced = std::find(dims.begin(), dims.end(), i) != dims.end();
    if (!reduced)
      out.push_back(in[static_cast<size_t>(i)]);
    else if (keepdim)
      out.push_back(sym::constant(1));
  }
  return one(c.result(out));
}

// ---- products ------------------------------------------------------------------------------

void inner(const SymCall& c, Expr a, Expr b) {
  COIL_ASSERT(c.eq(a, b), c.why(), ": inner sizes ", sym::to_string(a), " and ", sym::to_string(b),
              " differ, yet the meta function agreed");
}

Layouts mm(const SymCall& c) {
  SymShape x = c.sizes(0), y = c.sizes(1);
  inner(c, x[1], y[0]);
  return one(c.result({x[0], y[1]}));
}

Layouts bmm(const SymCall& c) {
  SymShape x = c.sizes(0), y = c.sizes(1);
  inner(c, x[0], y[0]);
  inner(c, x[2], y[1]);
  return one(c.result({c.simplify(x[0]), x[1], y[2]}));
}

Layouts addmm(const SymCall& c) {
  SymShape x = c.sizes(1), y = c.sizes(2);
  inner(c, x[1], y[0]);
  SymShape out{x[0], y[1]};
  broadcast(c, {c.sizes(0), out});
  return one(c.result({c.simplify(x[0]), c.simplify(y[1])}));
}

Layouts matmul(const SymCall& c) {
  SymShape x = c.sizes(0), y = c.sizes(1);
  inner(c, x.back(), y.size() == 1 ? y[0] : y[y.size() - 2]);
  SymShape out = broadcast(c, {leading(x, 2), leading(y, 2)});
  if (x.size() >= 2) out.push_back(c.simplify(x[x.size() - 2]));
  if (y.size() >= 2) out.push_back(c.simplify(y.back()));
  return one(c.result(out));
}

Layouts linear(const SymCall& c) {
  SymShape x = c.sizes(0), w = c.sizes(1);
  inner(c, x.back(), w[1]);
  SymShape out = concat(leading(x, 1), {w[0]});
  if (c.is_tensor(2)) out = broadcast(c, {c.sizes(2), out});
  return one(c.result(out));
}

Layouts attention(const SymCall& c) {
  SymShape q = c.sizes(0), k = c.sizes(1), v = c.sizes(2);
  inner(c, k.back(), q.back());
  inner(c, v[v.size() - 2], k[k.size() - 2]);
  SymShape batch = broadcast(c, {leading(q, 2), leading(k, 2), leading(v, 2)});
  SymShape out = concat(batch, {q[q.size() - 2], v.back()});
  if (c.is_tensor(3)) broadcast(c, {c.sizes(3), concat(batch, {q[q.size() - 2], k[k.size() - 2]})});
  return one(c.result(out));
}

// Self-attention with its rows' log-sum-exp: [out, stats], every operand of the query's sizes.
Layouts attention_stats(const SymCall& c) {
  const SymShape q = c.sizes(0);
  for (size_t i : {1, 2}) eq_all(c, c.sizes(i), q);
  return {c.result(q, 0), c.result(leading(q, 1), 1)};
}

// Self-attention's gradients stacked: every operand has the query's sizes.
Layouts attention_backward(const SymCall& c) {
  const SymShape q = c.sizes(1);
  for (size_t i : {0, 2, 3, 4}) eq_all(c, c.sizes(i), q);
  return one(c.result(concat({sym::constant(3)}, q)));
}

// ---- indexing, joining ----------------------------------------------------------------------

Layouts embedding(const SymCall& c) { return one(c.result(concat(c.sizes(1), {c.sizes(0)[1]}))); }

// gather and scatter_add read self at the index's positions: outside `dim` the index may not
// be larger than self (nor, for scatter_add, than src).
Layouts gather(const SymCall& c) {
  SymShape self = c.sizes(0), index = c.sizes(2);
  const int64_t d = wrap_dim(c.plain_int(1), static_cast<int64_t>(self.size()), c.why().c_str());
  if (!is_static(index) || !(sym_numel(index)->is_const(0)))
    for (size_t k = 0; k < index.size() && k < self.size(); ++k)
      if (static_cast<int64_t>(k) != d) c.le(index[k], self[k]);
  if (c.op() == OpId::scatter_add) {
    SymShape src = c.sizes(3);
    for (size_t k = 0; k < index.size() && k < src.size(); ++k) c.le(index[k], src[k]);
    return one(c.result(self));
  }
  return one(c.result(index));
}

Layouts index_select(const SymCall& c) {
  SymShape self = c.sizes(0);
  if (self.empty()) return one(c.result({}));
  const int64_t d = wrap_dim(c.plain_int(1), static_cast<int64_t>(self.size()), "index_select");
  self[static_cast<size_t>(d)] = sym_numel(c.sizes(2));
  return one(c.result(self));
}

Layouts cat(const SymCall& c) {
  std::vector<SymLayout> parts = c.layouts(0);
  // 1-D empty tensors take no part (PyTorch's rule); sizes 0 are never symbolic.
  auto skipped = [](const SymLayout& l) { return l.sizes.size() == 1 && l.sizes[0]->is_const(0); };
  const SymLayout* ref = nullptr;
  for (const SymLayout& l : parts)
    if (!skipped(l)) {
      ref = &l;
      break;
    }
  if (!ref) return one(c.result({sym::constant(0)}));
  const int64_t d = wrap_dim(c.plain_int(1), static_cast<int64_t>(ref->sizes.size()), "cat");
  SymShape out = ref->sizes;
  out[static_cast<size_t>(d)] = sym::constant(0);
  for (const SymLayout& l : parts) {
    if (skipped(l)) continue;
    for (size_t k = 0; k < out.size(); ++k)
      if (static_cast<int64_t>(k) != d) c.eq(l.sizes[k], ref->sizes[k]);
    out[static_cast<size_t>(d)] = out[static_cast<size_t>(d)] + l.sizes[static_cast<size_t>(d)];
  }
  for (Expr& e : out) e = c.simplify(e);
  return one(c.result(out));
}

Layouts stack(const SymCall& c) {
  std::vector<SymLayout> parts = c.layouts(0);
  for (const SymLayout& l : parts)
    for (size_t k = 0; k < l.sizes.size(); ++k) c.eq(l.sizes[k], parts[0].sizes[k]);
  SymShape out;
  for (Expr e : parts[0].sizes) out.push_back(c.simplify(e));
  const int64_t d = wrap_dim(c.plain_int(1), static_cast<int64_t>(out.size()) + 1, "stack");
  out.insert(out.begin() + d, sym::constant(static_cast<int64_t>(parts.size())));
  return one(c.result(out));
}

Layouts pad(const SymCall& c) {
  SymShape x = c.sizes(0), pads = c.ints(1);
  const size_t nd = x.size();
  for (size_t p = 0; 2 * p < pads.size(); ++p) {
    size_t d = nd - 1 - p;
    x[d] = x[d] + pads[2 * p] + pads[2 * p + 1];
    c.le(sym::constant(0), x[d]);
  }
  return one(c.result(x));
}

Layouts repeat(const SymCall& c) {
  SymShape x = c.sizes(0), reps = c.ints(1);
  const size_t lead = reps.size() - x.size();
  SymShape out(reps.size());
  for (size_t i = 0; i < reps.size(); ++i) out[i] = i < lead ? reps[i] : reps[i] * x[i - lead];
  return one(c.result(out));
}

// ---- losses --------------------------------------------------------------------------------

Layouts class_loss(const SymCall& c) {
  if (std::get<std::string>(c.args()[2]) != "none") return one(c.result({}));
  SymShape x = c.sizes(0), t = c.sizes(1);
  if (x.size() == 1) return one(c.result({}));
  x.erase(x.begin() + 1);  // the class dim
  // Class indices have exactly those sizes; probabilities have the input's.
  if (t.size() == x.size())
    for (size_t k = 0; k < t.size(); ++k) c.eq(t[k], x[k]);
  return one(c.result(c.simplify(x)));
}

Layouts mse_loss(const SymCall& c) {
  SymShape s = broadcast(c, {c.sizes(0), c.sizes(1)});
  return one(c.result(std::get<std::string>(c.args()[2]) == "none" ? s : SymShape{}));
}

// ---- factories -----------------------------------------------------------------------------

Layouts sized_factory(const SymCall& c) {
  return one(c.result(c.ints(c.op() == OpId::randint ? 2 : 0)));
}

// arange of ints: (end - start + step - 1) // step elements, for a positive constant step.
Layouts arange(const SymCall& c) {
  bool symbolic = false;
  for (size_t i = 0; i < 3; ++i) symbolic |= std::holds_alternative<SymIntArg>(c.args()[i]);
  if (!symbolic) return one(SymLayout::of(c.metas()[0]));
  Expr start = c.int_arg(0), end = c.int_arg(1), step = c.int_arg(2);
  COIL_ASSERT(step->is_const() && step->value() > 0, "arange: a symbolic or negative step");
  c.le(start, end);
  return one(c.result({sym::floordiv(end - start + step - 1, step->value())}));
}

Layouts eye(const SymCall& c) {
  Expr n = c.int_arg(0);
  return one(c.result({n, c.has(1) ? c.int_arg(1) : n}));
}

Layouts linspace(const SymCall& c) { return one(c.result({c.int_arg(2)})); }

const std::unordered_map<OpId, Rule>& rules() {
  static const auto table = [] {
    std::vector<std::pair<OpId, Rule>> r = {
        {OpId::mm, mm},
        {OpId::bmm, bmm},
        {OpId::addmm, addmm},
        {OpId::addmm_relu, addmm},
        {OpId::matmul, matmul},
        {OpId::linear, linear},
        {OpId::scaled_dot_product_attention, attention},
        {OpId::scaled_dot_product_attention_backward, attention_backward},
        {OpId::scaled_dot_product_attention_stats, attention_stats},
        {OpId::embedding, embedding},
        {OpId::gather, gather},
        {OpId::scatter_add, gather},
        {OpId::index_select, index_select},
        {OpId::cat, cat},
        {OpId::stack, stack},
        {OpId::pad, pad},
        {OpId::repeat, repeat},
        {OpId::cross_entropy, class_loss},
        {OpId::nll_loss, class_loss},
        {OpId::mse_loss, mse_loss},
        {OpId::full, sized_factory},
        {OpId::rand, sized_factory},
        {OpId::randn, sized_factory},
        {OpId::randint, sized_factory},
        {OpId::arange, arange},
        {OpId::eye, eye},
        {OpId::linspace, linspace},
    };
    for (OpId op : {OpId::softmax, OpId::log_softmax, OpId::dropout, OpId::cumsum, OpId::flip,
                    OpId::to_device})
      r.emplace_back(op, same_as_input);
    r.insert(r.end(), {{OpId::layer_norm, layer_norm},
                       {OpId::rms_norm, layer_norm},
                       {OpId::batch_norm, channel_norm},
                       {OpId::group_norm, channel_norm}});
    detail_sym::register_view_rules(r);
    detail_sym::register_conv_pool_rules(r);
    std::unordered_map<OpId, Rule> t(r.begin(), r.end());
    for (int i = 0; i < kNumOps; ++i) {
      OpId op = static_cast<OpId>(i);
      if (t.count(op)) continue;
      if (op_info(op).kind == OpKind::Pointwise) t[op] = pointwise;
      if (op_info(op).kind == OpKind::Reduction) t[op] = reduction;
    }
    return t;
  }();
  return table;
}

bool any_symbolic(const std::vector<NodeArg>& args, const LayoutOf& layout_of) {
  for (const NodeArg& a : args) {
    if (std::holds_alternative<SymIntArg>(a) || std::holds_alternative<SymIntsArg>(a)) return true;
    if (auto* n = std::get_if<Node*>(&a); n && !layout_of(*n).is_static()) return true;
    if (auto* ns = std::get_if<std::vector<Node*>>(&a))
      for (Node* m : *ns)
        if (!layout_of(m).is_static()) return true;
  }
  return false;
}

// An op without a rule: what its inputs' symbols are at capture becomes a guard.
Layouts specialised(OpId op, const std::vector<NodeArg>& args, const LayoutOf& layout_of,
                    const std::vector<TensorMeta>& metas, ShapeEnv& env) {
  const std::string why = std::string(op_name(op)) + " has no symbolic shape rule";
  auto fix = [&](const SymLayout& l) {
    for (Expr e : l.sizes) env.guard_int(e, why);
    for (Expr e : l.strides) env.guard_int(e, why);
    env.guard_int(l.offset, why);
  };
  for (const NodeArg& a : args) {
    if (auto* s = std::get_if<SymIntArg>(&a)) env.guard_int(s->expr, why);
    if (auto* s = std::get_if<SymIntsArg>(&a))
      for (Expr e : s->exprs) env.guard_int(e, why);
    if (auto* n = std::get_if<Node*>(&a)) fix(layout_of(*n));
    if (auto* ns = std::get_if<std::vector<Node*>>(&a))
      for (Node* m : *ns) fix(layout_of(m));
  }
  Layouts out;
  for (const TensorMeta& m : metas) out.push_back(SymLayout::of(m));
  return out;
}

// A rule's result must be its meta function's at the hints.
void check_against_metas(OpId op, const Layouts& out, const std::vector<TensorMeta>& metas,
                         const ShapeEnv* env) {
  auto hint = [&](Expr e) { return env ? env->hint(e) : e->value(); };
  auto hints = [&](const SymShape& s) {
    Shape h;
    for (Expr e : s) h.push_back(hint(e));
    return h;
  };
  COIL_ASSERT(out.size() == metas.size(), op_name(op), ": the symbolic rule gives ", out.size(),
              " outputs, the meta function ", metas.size());
  for (size_t i = 0; i < out.size(); ++i) {
    TensorMeta m = metas[i];
    TensorMeta got{m.dtype, hints(out[i].sizes), hints(out[i].strides), hint(out[i].offset),
                   m.device};
    COIL_ASSERT(got == m, op_name(op), ": the symbolic rule gives ", shape_str(got.sizes),
                shape_str(got.strides), "+", got.offset, " at the hints, the meta function ",
                shape_str(m.sizes), shape_str(m.strides), "+", m.offset, " (output ", i, ": ",
                sym_shape_str(out[i].sizes), sym_shape_str(out[i].strides), ")");
  }
}

}  // namespace

std::vector<SymLayout> sym_layouts(OpId op, const std::vector<NodeArg>& args,
                                   const LayoutOf& layout_of, const std::vector<TensorMeta>& metas,
                                   ShapeEnv* env) {
  if (!any_symbolic(args, layout_of)) {
    Layouts out;
    for (const TensorMeta& m : metas) out.push_back(SymLayout::of(m));
    return out;
  }
  COIL_ASSERT(env, op_name(op), ": symbolic arguments without a shape env");
  auto it = rules().find(op);
  Layouts out = it == rules().end() ? specialised(op, args, layout_of, metas, *env)
                                    : it->second(SymCall(op, args, layout_of, metas, env));
  for (SymLayout& l : out) {
    l.sizes = env->simplify(l.sizes);
    l.strides = env->simplify(l.strides);
    l.offset = env->simplify(l.offset);
  }
  check_against_metas(op, out, metas, env);
  return out;
}

}  // namespace coil
