#include "lower/context.h"

#include <algorithm>

#include <coil/error.h>

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

Index Context::vars(const Shape& sizes, const char* prefix) {
  Index out;
  for (size_t k = 0; k < sizes.size(); ++k)
    out.push_back(sym::index_var(prefix + std::to_string(k), std::max<int64_t>(sizes[k], 1)));
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

std::string Context::add_buffer(ir::Buffer b) {
  if (b.name.empty()) b.name = "buf" + std::to_string(next_buffer_++);
  program_.buffers.push_back(std::move(b));
  return program_.buffers.back().name;
}

TensorBox Context::realize(const TensorBox& b) {
  if (b.storage) return b;
  ir::Buffer buf;
  buf.kind = ir::BufferKind::Computed;
  buf.layout = ir::Layout::contiguous(b.dtype, b.sizes);
  ir::Computation c;
  c.ranges = b.sizes;
  c.vars = vars(b.sizes, "i");
  c.body = b.load(c.vars);
  c.dtype = b.dtype;
  buf.compute = std::move(c);
  ir::Layout layout = buf.layout;
  std::string name = add_buffer(std::move(buf));
  return from_storage(ir::TensorRef{name, layout});
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

TensorBox Context::memoized(DType dtype, Shape sizes, Loader load) {
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

ir::Value load_broadcast(const TensorBox& b, const Shape& sizes, const Index& index) {
  size_t lead = sizes.size() - b.sizes.size();
  Index idx;
  for (size_t k = 0; k < b.sizes.size(); ++k)
    idx.push_back(b.sizes[k] == 1 ? sym::constant(0) : index[lead + k]);
  return b.load(idx);
}

ir::Value load_arg(const Context& cx, const NodeArg& a, DType dtype, const Shape& sizes,
                   const Index& index) {
  if (auto* n = std::get_if<Node*>(&a))
    return ir::ValueNode::cast(load_broadcast(cx.box(*n), sizes, index), dtype);
  if (auto* s = std::get_if<Scalar>(&a)) return ir::ValueNode::make_constant(*s, dtype);
  if (auto* i = std::get_if<int64_t>(&a)) return ir::ValueNode::make_constant(Scalar(*i), dtype);
  if (auto* d = std::get_if<double>(&a)) return ir::ValueNode::make_constant(Scalar(*d), dtype);
  if (auto* b = std::get_if<bool>(&a)) return ir::ValueNode::make_constant(Scalar(*b), dtype);
  throw InternalError("lowering: argument is neither a tensor nor a number");
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
    return t;
  }();
  auto it = table.find(op);
  return it == table.end() ? nullptr : &it->second;
}

}  // namespace coil::lower
