#include "lower/lower_graph.h"

#include <map>
#include <set>
#include <string>
#include <utility>

#include <coil/error.h>

#include "lower/context.h"
#include "runtime/tensor_impl.h"

namespace coil::lower {

namespace {

// A pointwise value read by several users is recomputed in each (memory traffic costs more
// than arithmetic) until its body grows past this many IR nodes, or reads more than this many
// distinct elements (as Inductor's realize_reads_threshold); then it is written once. Without
// the second bound a residual stream (x + a1 + m1 + a2 + ...) was never written: each layer's
// layer norm and the next sum read every earlier layer's output again.
constexpr size_t kMaxInlineSize = 96;
constexpr size_t kMaxInlineReads = 4;

size_t distinct_reads(const ir::Value& v) {
  std::set<std::pair<std::string, const void*>> reads;  // index expressions are hash-consed
  ir::for_each_load(
      v, [&](const ir::ValueNode& load) { reads.emplace(load.buffer(), load.index().get()); });
  return reads.size();
}

// Too costly to recompute in each of several users.
bool realize_on_reuse(const ir::Value& body) {
  return ir_size(body) > kMaxInlineSize || distinct_reads(body) > kMaxInlineReads;
}

// The users of `n`'s value, counting each user of a reshape of it (the view a product or a
// sum of a 3-d gradient reads as a matrix) as one.
size_t users_through_reshapes(const Node& n) {
  size_t count = 0;
  for (const Node* u : n.users())
    count += u->kind() == NodeKind::Call && (u->op() == OpId::reshape || u->op() == OpId::view)
                 ? users_through_reshapes(*u)
                 : 1;
  return count;
}

TensorBox input_box(Context& cx, const Node& n, ir::BufferKind kind, int64_t index) {
  const TensorMeta& m = n.tensor_meta();
  const SymLayout l = n.sym_layout();
  ir::Buffer b;
  b.kind = kind;
  b.name = (kind == ir::BufferKind::Input ? "in" : "const") +
           std::to_string(cx.program().buffers.size());
  // The kernel is handed the tensor's data pointer, which already includes its storage offset.
  b.layout = ir::Layout{m.dtype, l.sizes, l.strides, sym::constant(0)};
  b.input_index = index;
  if (kind == ir::BufferKind::Constant) b.value = n.value();
  ir::Layout layout = b.layout;
  return cx.from_storage(ir::TensorRef{cx.add_buffer(std::move(b)), layout});
}

// `value`, the value of `n`, written to memory in the layout eager gives `n`: contiguous, or
// channels-last (a convolution's input or output kept NHWC, read so by the next one).
TensorBox realize_as(Context& cx, const Node* n, const TensorBox& value) {
  if (n->meta().size() == 1 && n->tensor_meta().is_channels_last() && value.sizes.size() == 4)
    return cx.realize(value, {0, 2, 3, 1});
  return cx.realize(value);
}

// `n`'s value in memory: written once, however many library calls read it (a product's
// operand read by the two products of its gradients).
ir::TensorRef storage_of(Context& cx, const Node* n) {
  const TensorBox& value = cx.box(n);
  if (value.storage) return *value.storage;
  TensorBox written = realize_as(cx, n, value);
  if (n->meta().size() == 1) cx.set(n, {written});
  return *written.storage;
}

bool is_matrix_product(OpId op) {
  return op == OpId::mm || op == OpId::bmm || op == OpId::addmm || op == OpId::addmm_relu;
}

// Whether a permutation swaps the last two dims and keeps the others in place.
bool swaps_last_two(const Shape& dims) {
  const auto rank = static_cast<int64_t>(dims.size());
  if (rank < 2) return false;
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t want = d < rank - 2 ? d : d == rank - 2 ? rank - 1 : rank - 2;
    if ((dims[d] < 0 ? dims[d] + rank : dims[d]) != want) return false;
  }
  return true;
}

// A matrix product's operand that is a value not yet in memory, reshaped or transposed (the
// last two dims swapped, leading dims perhaps merged: [b, h, m, n] -> [b * h, n, m]) — an
// attention's recomputed weights p for p^T g, a recomputed activation for a weight's gradient,
// the softmax gradient read by two products — is written once in its own order and handed to
// the library as a view, which it reads as fast: a kernel writing the transpose would read or
// write one side a row apart, and each differently shaped use would write its own copy. The
// value's later readers read the written buffer too.
struct ProductOperand {
  const Node* base;                  // the value written to memory
  const Node* transposed = nullptr;  // the transposed value, when the operand is a transpose
  bool reshaped = false;
};

ProductOperand product_operand_of(const Node* n) {
  auto is_call = [](const Node* m, OpId op) {
    return m->kind() == NodeKind::Call && m->op() == op;
  };
  const bool reshaped = is_call(n, OpId::reshape);
  const Node* inner = reshaped ? std::get<Node*>(n->args()[0]) : n;
  if (!is_call(inner, OpId::permute) || !swaps_last_two(std::get<Shape>(inner->args()[1])))
    return {inner, nullptr, reshaped};
  const Node* base = std::get<Node*>(inner->args()[0]);
  // The transposed value may itself be a reshape (a [batch, tokens, features] value read as
  // [tokens, features]): of a contiguous buffer, any reshape is contiguous.
  return {is_call(base, OpId::reshape) ? std::get<Node*>(base->args()[0]) : base, base, reshaped};
}

ir::TensorRef product_operand(Context& cx, const Node* n) {
  const ProductOperand op = product_operand_of(n);
  const bool transposed = op.transposed != nullptr;
  const Node* base = op.base;
  const SymShape from = transposed && op.transposed->meta().size() == 1
                            ? op.transposed->sym_layout().sizes
                            : SymShape{};
  if ((!transposed && !op.reshaped) || base->meta().size() != 1) return storage_of(cx, n);
  const TensorBox& value = cx.box(base);
  const SymShape target = n->sym_layout().sizes;
  if (transposed && (from.size() < 2 || target.size() < 2 || target.end()[-2] != from.end()[-1] ||
                     target.end()[-1] != from.end()[-2]))
    return storage_of(cx, n);
  if (value.storage && value.storage->view.strides != sym_contiguous_strides(value.sizes))
    return storage_of(cx, n);  // a view of other memory: the box's own view is right
  if (!value.storage) cx.set(base, {cx.realize(value)});
  ir::TensorRef ref = *cx.box(base).storage;  // contiguous: also in `from`
  ref.view.sizes = target;
  ref.view.strides = sym_contiguous_strides(target);
  if (transposed) {
    const sym::Expr rows = from.end()[-2], cols = from.end()[-1];
    ref.view.strides.end()[-2] = sym::constant(1);
    ref.view.strides.end()[-1] = cols;
    sym::Expr step = rows * cols;
    for (size_t k = target.size() - 2; k-- > 0;) {
      ref.view.strides[k] = step;
      step = step * target[k];
    }
  }
  return ref;
}

// The eager kernel of `n`, called from the compiled graph with realized arguments: its result's
// layout is the op's symbolic shape rule over the arguments' buffer views.
std::vector<TensorBox> lower_extern(Context& cx, const Node& n, std::string reason) {
  ir::ExternCall call;
  call.op = n.op();
  call.reason = std::move(reason);
  std::unordered_map<const Node*, ir::Layout> refs_of;
  for (const NodeArg& a : n.args()) {
    if (auto* p = std::get_if<Node*>(&a)) {
      ir::TensorRef r = is_matrix_product(n.op()) ? product_operand(cx, *p) : storage_of(cx, *p);
      refs_of[*p] = r.view;
      call.args.emplace_back(std::move(r));
    } else if (auto* ps = std::get_if<std::vector<Node*>>(&a)) {
      std::vector<ir::TensorRef> refs;
      for (Node* m : *ps) {
        refs.push_back(storage_of(cx, m));
        refs_of[m] = refs.back().view;
      }
      call.args.emplace_back(std::move(refs));
    } else {
      call.args.emplace_back(
          to_arg(a, [](Node*) -> Tensor { throw InternalError("unreachable"); }));
    }
  }
  std::vector<SymLayout> out = layouts_over(cx, n, refs_of);
  COIL_ASSERT(out.size() == n.meta().size(), "lowering: extern ", op_name(n.op()), " with ",
              out.size(), " layouts for ", n.meta().size(), " results");
  // A buffer per result: the first makes the call, each later one takes its result of it.
  std::vector<TensorBox> boxes;
  for (size_t i = 0; i < out.size(); ++i) {
    ir::Buffer b;
    b.kind = ir::BufferKind::Extern;
    // Relative to the returned tensor's data pointer, which includes its storage offset.
    b.layout = ir::Layout{n.meta()[i].dtype, out[i].sizes, out[i].strides, sym::constant(0)};
    b.call = call;
    b.call->result = static_cast<int64_t>(i);
    if (i > 0) b.call->first = boxes.front().storage->buffer;
    ir::Layout layout = b.layout;
    boxes.push_back(cx.from_storage(ir::TensorRef{cx.add_buffer(std::move(b)), layout}));
  }
  return boxes;
}

// The values a matrix product will write to memory for its operands (product_operand).
std::set<const Node*> product_bases(const Graph& g) {
  std::set<const Node*> bases;
  for (Node* n : g.nodes())
    if (n->kind() == NodeKind::Call && is_matrix_product(n->op()))
      for (const NodeArg& a : n->args())
        if (auto* p = std::get_if<Node*>(&a)) bases.insert(product_operand_of(*p).base);
  return bases;
}

std::vector<TensorBox> lower_call(Context& cx, const Node& n, const LibraryCalls& library_calls,
                                  bool product_reads_it) {
  if (std::optional<std::string> library = library_calls(n))
    return lower_extern(cx, n, std::move(*library));
  std::string why;
  if (const Lowering* l = find_lowering(n.op())) {
    if (auto boxes = (*l)(cx, n, &why)) {
      for (TensorBox& b : *boxes) b = cx.with_origin(std::move(b), &n);
      // A pointwise value too large to recompute in each of several users is written once.
      // So is one that a product reads from memory anyway, where recomputing it would read
      // more than one element per element (a GELU's gradient, read by the weight's product
      // and summed for the bias: the sum reads the written gradient, not the two tensors it
      // is made of); its users lowered before the product would otherwise recompute it.
      if (users_through_reshapes(n) > 1)
        for (TensorBox& b : *boxes) {
          if (b.storage) continue;
          const ir::Value body = b.load(Context::vars(b.sizes, "i"));
          if (product_reads_it && boxes->size() == 1 && distinct_reads(body) > 1)
            b = cx.realize(b);
          else if (realize_on_reuse(body))
            b = realize_as(cx, &n, b);
        }
      return *boxes;
    }
  } else {
    why = "no lowering: runs the eager kernel";
  }
  return lower_extern(cx, n, why);
}

// Program::written_back from the graph's: a result that is a whole computed buffer, returned
// once, laid out as the input it goes back into.
void mark_written_back(const Graph& g, ir::Program& p) {
  std::map<std::string, int> returned;
  for (const ir::TensorRef& o : p.outputs) ++returned[o.buffer];
  for (const auto& [result, input] : g.written_back()) {
    const ir::TensorRef& o = p.outputs.at(result);
    const ir::Buffer& b = p.buffer(o.buffer);
    if (b.kind != ir::BufferKind::Computed || returned[o.buffer] != 1 ||
        o.view.offset != b.layout.offset || o.view.sizes != b.layout.sizes ||
        o.view.strides != b.layout.strides)
      continue;
    for (const ir::Buffer& in : p.buffers)
      if (in.kind == ir::BufferKind::Input && in.input_index == static_cast<int64_t>(input) &&
          in.layout.dtype == b.layout.dtype && in.layout.sizes == b.layout.sizes &&
          in.layout.strides == b.layout.strides && in.layout.offset->is_const(0) &&
          b.layout.offset->is_const(0))
        p.written_back[o.buffer] = in.name;
  }
}

// The node `n` is a view of (a view op's input, or the multi-output view a GetItem takes a part
// of), or nullptr.
const Node* viewed(const Node* n) {
  if (n->kind() == NodeKind::GetItem) return n->source();
  if (n->kind() != NodeKind::Call || op_info(n->op()).kind != OpKind::View) return nullptr;
  auto* x = std::get_if<Node*>(&n->args()[0]);
  return x ? *x : nullptr;
}

// The results that are views of a value not yet in memory, by that value, each with the views
// between them (the result first), when eager's layout of the result is not the contiguous one
// it would be written in alone.
using ViewChains = std::map<const Node*, std::vector<std::vector<const Node*>>>;
ViewChains strided_views(Context& cx, const std::vector<Node*>& results) {
  ViewChains chains;
  for (const Node* r : results) {
    if (r->meta().size() != 1 || cx.box(r).storage) continue;
    const SymLayout l = r->sym_layout();
    if (l.strides == sym_contiguous_strides(l.sizes)) continue;
    std::vector<const Node*> chain;
    const Node* base = r;
    for (const Node* below = viewed(r); below; below = viewed(below)) {
      chain.push_back(base);
      base = below;
    }
    if (!chain.empty() && base->meta().size() == 1 && !cx.box(base).storage)
      chains[base].push_back(std::move(chain));
  }
  return chains;
}

// Results that are views of one value (q, k and v split from one projection and saved for the
// backward, whose graph reads them at the projection's strides) keep eager's layout: where
// together they cover the value, it is written whole and each is lowered again as its view.
// (A view covering a small part of a large value is written alone, contiguous; a graph that
// reads it expecting eager's strides gets a copy from the wrapper.)
void write_viewed_values(Context& cx, const std::vector<Node*>& results,
                         const LibraryCalls& library_calls) {
  auto count = [&](const Node* n) { return cx.program().hint(sym_numel(n->sym_layout().sizes)); };
  for (const auto& [base, chains] : strided_views(cx, results)) {
    int64_t covered = 0;
    for (const std::vector<const Node*>& chain : chains) covered += count(chain.front());
    if (covered < count(base)) continue;
    storage_of(cx, base);
    for (const std::vector<const Node*>& chain : chains)
      for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
        const Node* n = *it;
        if (n->kind() == NodeKind::GetItem)
          cx.set(n, {cx.boxes(n->source()).at(n->index())});
        else
          cx.set(n, lower_call(cx, *n, library_calls, false));
      }
  }
}

}  // namespace

ir::Program lower_graph(const Graph& g, const LibraryCalls& library_calls) {
  Context cx;
  if (const std::shared_ptr<ShapeEnv>& env = g.shape_env()) {
    cx.set_shape_env(env.get());
    cx.program().hints = env->hint_values();
  }
  // The graph's device: its inputs', or its first result's (a factory's).
  for (Node* n : g.nodes())
    if (n->kind() == NodeKind::Placeholder || n->kind() == NodeKind::Parameter) {
      cx.program().device = n->tensor_meta().device;
      break;
    } else if (n->kind() == NodeKind::Call && !n->meta().empty()) {
      cx.program().device = n->meta()[0].device;
      break;
    }
  const std::set<const Node*> stored_for_products = product_bases(g);
  int64_t input_index = 0;
  for (Node* n : g.nodes()) {
    cx.begin_node(n->kind() == NodeKind::Output ? nullptr : n);
    switch (n->kind()) {
      case NodeKind::Placeholder:
        cx.set(n, {input_box(cx, *n, ir::BufferKind::Input, input_index++)});
        break;
      case NodeKind::Parameter:
      case NodeKind::Constant:
        cx.set(n, {input_box(cx, *n, ir::BufferKind::Constant, -1)});
        break;
      case NodeKind::Call:
        cx.set(n, lower_call(cx, *n, library_calls, stored_for_products.count(n) > 0));
        break;
      case NodeKind::GetItem:
        cx.set(n, {cx.boxes(n->source()).at(n->index())});
        break;
      case NodeKind::Output:
        write_viewed_values(cx, n->results(), library_calls);
        for (Node* r : n->results()) cx.program().outputs.push_back(storage_of(cx, r));
        mark_written_back(g, cx.program());
        break;
    }
  }
  return std::move(cx.program());
}

}  // namespace coil::lower
