#include "lower/context.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include <coil/error.h>

#include "graph/registry.h"
#include "graph/sym_rules.h"
#include "runtime/tensor_impl.h"

namespace coil::lower {

const std::vector<TensorBox>& Context::boxes(const Node* n) const {
  auto it = values_.find(n);
  COIL_ASSERT(it != values_.end(), "lowering: ", n->name(), " used before it was lowered");
  return it->second;
}

const TensorBox& Context::box(const Node* n) const {
  const auto& bs = boxes(n);
  COIL_ASSERT(bs.size() == 1, "lowering: ", n->name(), " has ", bs.size(), " outputs");
  return bs[0];
}

Index Context::vars(const SymShape& sizes, const char* prefix) {
  Index out;
  for (size_t k = 0; k < sizes.size(); ++k)
    out.push_back(sym::index_var(prefix + std::to_string(k),
                                 sizes[k]->is_const(0) ? sym::constant(1) : sizes[k]));
  return out;
}

TensorBox Context::from_storage(ir::TensorRef ref) const {
  TensorBox b;
  b.dtype = ref.view.dtype;
  b.sizes = ref.view.sizes;
  b.load = [buffer = ref.buffer, layout = ref.view](const Index& idx) {
    return ir::ValueNode::load(buffer, layout.dtype, layout.address(idx));
  };
  b.storage = std::move(ref);
  return b;
}

std::string Context::push_buffer(ir::Buffer b, const Origins& origins) {
  if (b.name.empty()) b.name = "buf" + std::to_string(next_buffer_++);
  std::vector<const Node*> calls;
  for (const Node* n : origins) {
    b.origins.push_back(n->name());
    if (n->kind() == NodeKind::Call) calls.push_back(n);
  }
  std::sort(b.origins.begin(), b.origins.end());
  std::sort(calls.begin(), calls.end(),
            [](const Node* x, const Node* y) { return x->is_before(y); });
  for (const Node* n : calls) ir::add_once(b.origin_ops, op_name(n->op()));
  program_.buffers.push_back(std::move(b));
  return program_.buffers.back().name;
}

std::string Context::add_buffer(ir::Buffer b) {
  Origins origins = std::exchange(frames_.back(), {});
  if (lowering_) origins.insert(lowering_);
  return push_buffer(std::move(b), origins);
}

TensorBox Context::realize(const TensorBox& b, const std::vector<size_t>& order) {
  if (b.storage) return b;
  SymShape memory;  // the sizes in memory order
  for (size_t d : order) memory.push_back(b.sizes[d]);
  ir::Buffer buf;
  buf.kind = ir::BufferKind::Computed;
  buf.layout = ir::Layout::contiguous(b.dtype, memory);
  ir::Computation c;
  c.ranges = memory;
  c.vars = vars(memory, "i");
  Index at(b.sizes.size());
  for (size_t k = 0; k < order.size(); ++k) at[order[k]] = c.vars[k];
  frames_.emplace_back();
  c.body = b.load(at);
  Origins origins = std::move(frames_.back());
  frames_.pop_back();
  c.dtype = b.dtype;
  buf.compute = std::move(c);
  ir::Layout view = buf.layout;
  view.sizes = b.sizes;
  for (size_t k = 0; k < order.size(); ++k) view.strides[order[k]] = buf.layout.strides[k];
  std::string name = push_buffer(std::move(buf), origins);
  return from_storage(ir::TensorRef{name, view});
}

TensorBox Context::realize(const TensorBox& b) {
  std::vector<size_t> order(b.sizes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  return realize(b, order);
}

void Context::begin_node(const Node* n) {
  lowering_ = n;
  frames_ = {Origins{}};
}

TensorBox Context::with_origin(TensorBox b, const Node* n) {
  if (b.storage) return b;  // a read of a buffer computes nothing: no origin to report
  // What this loader reached below it, over all its calls: a memoized loader answers a
  // repeated index from its cache without calling the loaders below, which must still count.
  auto below = std::make_shared<Origins>();
  b.load = [this, n, below, inner = std::move(b.load)](const Index& idx) {
    frames_.emplace_back();
    ir::Value v = inner(idx);
    below->insert(frames_.back().begin(), frames_.back().end());
    frames_.pop_back();
    frames_.back().insert(n);
    frames_.back().insert(below->begin(), below->end());
    return v;
  };
  return b;
}

namespace {
// Orders indices by the addresses of their (interned) expressions: a memo key, never printed.
struct IndexLess {
  bool operator()(const Index& a, const Index& b) const {
    return std::lexicographical_compare(
        a.begin(), a.end(), b.begin(), b.end(),
        [](sym::Expr x, sym::Expr y) { return std::less<const sym::Node*>()(x.get(), y.get()); });
  }
};
}  // namespace

TensorBox Context::memoized(DType dtype, SymShape sizes, Loader load) {
  auto cache = std::make_shared<std::map<Index, ir::Value, IndexLess>>();
  TensorBox b;
  b.dtype = dtype;
  b.sizes = std::move(sizes);
  b.load = [cache, load = std::move(load)](const Index& idx) {
    auto it = cache->find(idx);
    if (it != cache->end()) return it->second;
    ir::Value v = load(idx);
    cache->emplace(idx, v);
    return v;
  };
  return b;
}

ir::Value load_broadcast(const TensorBox& b, const SymShape& sizes, const Index& index) {
  size_t lead = sizes.size() - b.sizes.size();
  Index idx;
  for (size_t k = 0; k < b.sizes.size(); ++k)
    idx.push_back(b.sizes[k]->is_const(1) ? sym::constant(0) : index[lead + k]);
  return b.load(idx);
}

ir::Value size_value(sym::Expr e, DType dtype) {
  if (e->is_const()) return ir::ValueNode::make_constant(Scalar(e->value()), dtype);
  return ir::ValueNode::cast(ir::ValueNode::index_value(e), dtype);
}

ir::Value in_range(sym::Expr at, sym::Expr size) {
  using V = ir::ValueNode;
  return V::binary(ir::Op::LogicalAnd,
                   V::binary(ir::Op::Ge, V::index_value(at), V::make_constant(0, kInt64)),
                   V::binary(ir::Op::Lt, V::index_value(at), size_value(size, kInt64)));
}

sym::Expr clamp_into(sym::Expr at, sym::Expr size) {
  return sym::min(sym::max(at, sym::constant(0)), size - 1);
}

ir::Value load_arg(const Context& cx, const NodeArg& a, DType dtype, const SymShape& sizes,
                   const Index& index) {
  if (auto* n = std::get_if<Node*>(&a))
    return ir::ValueNode::cast(load_broadcast(cx.box(*n), sizes, index), dtype);
  if (auto* s = std::get_if<Scalar>(&a)) return ir::ValueNode::make_constant(*s, dtype);
  if (auto* i = std::get_if<int64_t>(&a)) return ir::ValueNode::make_constant(Scalar(*i), dtype);
  if (auto* d = std::get_if<double>(&a)) return ir::ValueNode::make_constant(Scalar(*d), dtype);
  if (auto* b = std::get_if<bool>(&a)) return ir::ValueNode::make_constant(Scalar(*b), dtype);
  if (auto* s = std::get_if<SymIntArg>(&a)) return size_value(s->expr, dtype);
  throw InternalError("lowering: argument is neither a tensor nor a number");
}

std::vector<SymLayout> layouts_over(Context& cx, const Node& n,
                                    const std::unordered_map<const Node*, ir::Layout>& inputs) {
  const ir::Program& p = cx.program();
  auto hints = [&](const SymShape& s) {
    Shape out;
    for (sym::Expr e : s) out.push_back(p.hint(e));
    return out;
  };
  std::vector<Arg> args;
  for (const NodeArg& a : n.args())
    args.push_back(to_arg(a, [&](const Node* in) {
      const ir::Layout& l = inputs.at(in);
      return meta_tensor(TensorMeta{l.dtype, hints(l.sizes), hints(l.strides), p.hint(l.offset),
                                    in->tensor_meta().device});
    }));
  std::vector<TensorMeta> metas = run_meta(n.op(), args);
  return sym_layouts(
      n.op(), n.args(),
      [&](const Node* in) {
        const ir::Layout& l = inputs.at(in);
        return SymLayout{l.sizes, l.strides, l.offset};
      },
      metas, cx.shape_env());
}

size_t ir_size(const ir::Value& v) {
  size_t n = 0;
  ir::any_node(v, [&](const ir::ValueNode&) {
    ++n;
    return false;
  });
  return n;
}

const Lowering* find_lowering(OpId op) {
  static const auto table = [] {
    std::unordered_map<OpId, Lowering> t;
    register_pointwise(t);
    register_reductions(t);
    register_views(t);
    register_factories(t);
    register_concat_pad(t);
    register_indexing(t);
    register_pools(t);
    return t;
  }();
  auto it = table.find(op);
  return it == table.end() ? nullptr : &it->second;
}

}  // namespace coil::lower
