#include "capture/tracer.h"

#include <coil/autograd.h>

#include "capture/counters.h"
#include "graph/sym_node.h"
#include "graph/view_replay.h"
#include "debug/log.h"
#include "runtime/copy.h"

namespace coil::capture {

namespace {
// What a tensor that aliases another is a view of: the base (never itself a view), the view
// ops from it, and how many writes into the base the view's node has seen.
struct ViewOf {
  Tensor base;
  std::vector<ViewStep> steps;
  uint64_t writes = 0;
};
}  // namespace

struct Tracer::State {
  const CompileOptions& options;
  GraphCompiler compile_segment;
  bool alive = true;
  bool broke = false;

  // The segment being recorded.
  std::shared_ptr<Graph> graph = std::make_shared<Graph>();
  std::vector<Tensor> segment_inputs;                  // real values of its placeholders
  std::unordered_map<const TensorImpl*, Node*> known;  // real tensors already in it
  std::vector<std::weak_ptr<TensorImpl>> produced;     // the proxies it made
  struct Written {
    Tensor self;  // the updated tensor (a proxy of an input, or a real tensor)
    Mutation where;
  };
  std::vector<Written> written;  // in-place updates of inputs and captured tensors
  // In-place writes so far into each tensor that views are taken of: a view taken before
  // the latest write is stale and is taken again from the base's new value when read.
  std::unordered_map<const TensorImpl*, uint64_t> writes;
  // Real tensors that are views of other real tensors (proxies that were views before a
  // graph break), with their node in the current segment.
  struct RealView {
    std::shared_ptr<TensorImpl> self;  // kept alive so that its address stays its own
    ViewOf view;
    Node* node = nullptr;
  };
  std::unordered_map<const TensorImpl*, RealView> real_views;

  // Across segments.
  std::vector<Tensor> input_proxies, real_inputs;
  std::unordered_set<const TensorImpl*> per_call;  // real tensors that differ between calls

  Tracer* owner;
  std::weak_ptr<State> self;

  State(const CompileOptions& o, GraphCompiler c, Tracer* t)
      : options(o), compile_segment(std::move(c)), owner(t) {}

  Node* node_of(const Tensor& t);
  ViewOf* view_of(const Tensor& t);
  Node* view_node(ViewOf& v, Node* node);
  void mark_view(const Tensor& out, const Tensor& input, ViewStep step);
  Tensor make_proxy(Node* node, const TensorMeta& meta);
  Node* current_value(const Tensor& t);
  Tensor input(const Tensor& real, const std::string& name, const std::optional<SymLayout>& layout);
  std::optional<SymLayout> symbolic_layout(const TensorMeta& m, const std::string& name,
                                           uint64_t dynamic);
  void flush();
  void start_segment();
  std::vector<Node*> mutation_nodes();
};

namespace {
struct Proxy : TensorExtension {
  std::shared_ptr<Tracer::State> state;
  Node* node;  // the node whose value this tensor is (in-place updates rebind it)
  std::optional<ViewOf> view;
  Proxy(std::shared_ptr<Tracer::State> s, Node* n) : state(std::move(s)), node(n) {}
  void materialize(TensorImpl& self, const char* what, const std::source_location& where) override {
    COIL_CHECK(state->alive, what, " at ", where.file_name(), ":", where.line(),
               ": this tensor was made while capturing a compiled function and escaped it "
               "(it has no data); return it from the function instead of storing it elsewhere");
    state->owner->graph_break(self, what, where);
  }
  // The program read a size of a dynamic graph's tensor as a number: whatever it does with it
  // holds only for that value, so the graph is specialised to it (torch guards on the
  // SymInt's value when Python turns it into an int).
  void read_geometry(const TensorImpl& self, GeometryRead what, int64_t dim) override;
  std::optional<std::vector<SymInt>> sym_sizes(const TensorImpl& self) override {
    const std::shared_ptr<ShapeEnv>& env = state->graph->shape_env();
    if (!state->alive || !env || node->graph() != state->graph.get()) return std::nullopt;
    std::vector<SymInt> out;
    for (sym::Expr e : node->sym_layout().sizes) out.push_back(make_symint(e, env));
    return out;
  }
};
Proxy* proxy_of(const Tensor& t, const Tracer::State* state) {
  auto* p = dynamic_cast<Proxy*>(t.impl()->proxy.get());
  return p && p->state.get() == state ? p : nullptr;
}
}  // namespace

// The node that stands for tensor `t` in the current segment. Real tensors enter the graph
// as placeholders when their values change between calls (inputs, results of an earlier
// segment), else as parameters: captured by reference, so in-place updates are seen.
Node* Tracer::State::node_of(const Tensor& t) {
  COIL_CHECK(t.defined(), "an undefined tensor was passed to an op during capture");
  if (Proxy* p = proxy_of(t, this)) {
    if (p->view) p->node = view_node(*p->view, p->node);
    return p->node;
  }
  if (auto it = real_views.find(t.impl()); it != real_views.end())
    return it->second.node = view_node(it->second.view, it->second.node);
  COIL_CHECK(t.has_storage(), "a tensor without data that does not belong to this capture ",
             "(from another compiled function's capture?) was used while capturing '", options.name,
             "'");
  if (auto it = known.find(t.impl()); it != known.end()) return it->second;
  Node* n;
  if (per_call.count(t.impl())) {
    n = graph->placeholder("seg_in" + std::to_string(segment_inputs.size()), meta_of(t));
    segment_inputs.push_back(t);
  } else {
    n = graph->parameter("captured", t);
  }
  known[t.impl()] = n;
  return n;
}

ViewOf* Tracer::State::view_of(const Tensor& t) {
  if (Proxy* p = proxy_of(t, this)) return p->view ? &*p->view : nullptr;
  auto it = real_views.find(t.impl());
  return it == real_views.end() ? nullptr : &it->second.view;
}

// The node of view `v` in this segment: `node`, unless the base was written since it was
// taken (or there is none yet), then the view taken again from the base's latest value.
Node* Tracer::State::view_node(ViewOf& v, Node* node) {
  uint64_t w = writes[v.base.impl()];
  if (node && v.writes == w) return node;
  NoGradGuard no_grad;
  Tensor t = v.base;
  for (const ViewStep& step : v.steps) t = apply_view(step, t);
  v.writes = w;
  return proxy_of(t, this)->node;
}

void Tracer::State::mark_view(const Tensor& out, const Tensor& input, ViewStep step) {
  ViewOf v;
  if (const ViewOf* in = view_of(input)) {
    v.base = in->base;
    v.steps = in->steps;
  } else {
    v.base = input;
  }
  v.steps.push_back(std::move(step));
  v.writes = writes[v.base.impl()];
  proxy_of(out, this)->view = std::move(v);
}

Tensor Tracer::State::make_proxy(Node* node, const TensorMeta& meta) {
  Tensor p = meta_tensor(meta);
  p.impl()->proxy = std::make_shared<Proxy>(self.lock(), node);
  produced.push_back(p.impl_ptr());
  return p;
}

Tracer::Tracer(const CompileOptions& options, GraphCompiler compile_segment)
    : state_(std::make_shared<State>(options, std::move(compile_segment), this)) {
  state_->self = state_;
}

Tracer::~Tracer() {
  state_->alive = false;
  // Proxies hold the state: drop the state's own references to them to break the cycle.
  state_->input_proxies.clear();
  state_->written.clear();
}

void Proxy::read_geometry(const TensorImpl& self, GeometryRead what, int64_t dim) {
  const std::shared_ptr<ShapeEnv>& env = state->graph->shape_env();
  if (!state->alive || !env || node->graph() != state->graph.get()) return;
  const SymLayout l = node->sym_layout();
  auto fix = [&](sym::Expr e, const std::string& read) {
    if (!e->is_const())
      env->guard_int(e, node->name() + "." + read + " read by the program as a number");
  };
  const std::string d = std::to_string(dim);
  switch (what) {
    case GeometryRead::Size:
      return fix(l.sizes.at(static_cast<size_t>(dim)), "size(" + d + ")");
    case GeometryRead::Stride:
      return fix(l.strides.at(static_cast<size_t>(dim)), "stride(" + d + ")");
    case GeometryRead::Sizes:
      for (sym::Expr e : l.sizes) fix(e, "sizes()");
      return;
    case GeometryRead::Strides:
      for (sym::Expr e : l.strides) fix(e, "strides()");
      return;
    case GeometryRead::Numel:
      return fix(sym_numel(l.sizes), "numel()");
  }
}

namespace {

// Strides dense in some order of the dims (contiguous, or a permutation of it): the order,
// innermost last; nullopt for other layouts.
std::optional<std::vector<size_t>> dense_order(const TensorMeta& m) {
  std::vector<size_t> order(m.sizes.size());
  for (size_t d = 0; d < order.size(); ++d) order[d] = d;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return m.strides[a] > m.strides[b]; });
  int64_t expected = 1;
  for (size_t i = order.size(); i-- > 0;) {
    if (m.strides[order[i]] != expected) return std::nullopt;
    expected *= m.sizes[order[i]];
  }
  return order;
}

}  // namespace

Tensor Tracer::input(const Tensor& real, const std::string& name, uint64_t dynamic) {
  COIL_CHECK(real.defined(), "compiled function '", state_->options.name, "': input '", name,
             "' is an undefined tensor");
  std::optional<SymLayout> layout;
  if (dynamic) layout = state_->symbolic_layout(meta_of(real), name, dynamic);
  return state_->input(real, name, layout);
}

Tensor Tracer::input(const Tensor& real, const std::string& name, const SymLayout& layout,
                     std::shared_ptr<ShapeEnv> env) {
  COIL_ASSERT(!state_->graph->shape_env() || state_->graph->shape_env() == env,
              "a trace over two shape envs");
  state_->graph->set_shape_env(std::move(env));
  return state_->input(real, name, layout);
}

SymLayout Tracer::sym_layout(const Tensor& proxy) const {
  return state_->node_of(proxy)->sym_layout();
}

Tensor Tracer::State::input(const Tensor& real, const std::string& name,
                            const std::optional<SymLayout>& layout) {
  const TensorMeta meta = meta_of(real);
  Node* n = graph->placeholder(name, meta, layout);
  Tensor p = meta_tensor(meta);
  p.impl()->requires_grad = real.requires_grad();
  p.impl()->proxy = std::make_shared<Proxy>(self.lock(), n);
  segment_inputs.push_back(real);
  input_proxies.push_back(p);
  real_inputs.push_back(real);
  return p;
}

std::vector<Tensor> Tracer::call(OpId op, std::vector<Arg>& args) {
  State& s = *state_;
  std::vector<NodeArg> node_args;
  node_args.reserve(args.size());
  for (const Arg& a : args) {
    if (auto* t = std::get_if<Tensor>(&a)) {
      node_args.emplace_back(s.node_of(*t));
    } else if (auto* l = std::get_if<std::vector<Tensor>>(&a)) {
      std::vector<Node*> nodes;
      for (const Tensor& t : *l) nodes.push_back(s.node_of(t));
      node_args.emplace_back(std::move(nodes));
    } else {
      node_args.push_back(to_node_arg(a));
    }
  }
  // A non-blocking copy from a GPU to the host returns before its data arrives; a compiled
  // graph's host kernels would read it at once, so the graph's copy waits.
  if (op == OpId::to_device && std::get<Device>(args[1]).is_cpu()) node_args[2] = NodeArg(false);
  Node* n = s.graph->call(op, std::move(node_args));
  std::vector<Tensor> outs;
  if (n->is_multi_output()) {
    for (size_t i = 0; i < n->meta().size(); ++i) {
      Node* item = s.graph->getitem(n, static_cast<int64_t>(i));
      outs.push_back(s.make_proxy(item, item->tensor_meta()));
    }
  } else {
    outs.push_back(s.make_proxy(n, n->tensor_meta()));
  }
  if (op_info(op).kind == OpKind::View) {  // the outputs alias the input
    const Tensor& input = std::get<Tensor>(args[0]);
    for (size_t i = 0; i < outs.size(); ++i) {
      if (!aliases_input(op, input, outs[i])) continue;
      ViewStep step{op, args, static_cast<int64_t>(i)};
      step.args[0] = Tensor();
      s.mark_view(outs[i], input, std::move(step));
    }
  }
  return outs;
}

void Tracer::assign(const Tensor& self, const Tensor& value) {
  State& s = *state_;
  if (const ViewOf* written_view = s.view_of(self)) {
    // A write into a view is a new value for its base: the base with the view's elements
    // replaced. The view (and every other view of the base) is taken again when next read.
    NoGradGuard no_grad;
    const ViewOf view = *written_view;
    std::vector<Tensor> inputs{view.base};  // the input of each view step
    for (size_t i = 0; i + 1 < view.steps.size(); ++i)
      inputs.push_back(apply_view(view.steps[i], inputs.back()));
    Tensor v = value.dtype() == self.dtype() ? value : value.to(self.dtype());
    for (size_t i = view.steps.size(); i-- > 0;) v = scatter_view(view.steps[i], inputs[i], v);
    assign(view.base, v);
    return;
  }
  ++s.writes[self.impl()];
  Node* v = s.node_of(value);
  if (value.dtype() != self.dtype()) {
    std::vector<Arg> cast{value, self.dtype()};
    normalize_args(OpId::to_dtype, cast);
    v = s.node_of(call(OpId::to_dtype, cast)[0]);
  }
  if (Proxy* p = proxy_of(self, state_.get())) {
    const Node* old = p->node;
    if (old->kind() == NodeKind::Placeholder) {
      // An input of the function: the caller's tensor must change too.
      bool seen = false;
      for (const auto& w : s.written) seen = seen || w.self.is_same(self);
      if (!seen) {
        const auto& ph = s.graph->placeholders();
        int64_t k = std::find(ph.begin(), ph.end(), old) - ph.begin();
        s.written.push_back({self, Mutation{k, {}}});
      }
    }
    p->node = v;
    return;
  }
  // A real tensor: an input of a later segment or a captured tensor.
  Node* old = s.node_of(self);
  bool seen = false;
  for (const auto& w : s.written) seen = seen || w.self.is_same(self);
  if (!seen) {
    Mutation m;
    if (old->kind() == NodeKind::Placeholder) {
      const auto& ph = s.graph->placeholders();
      m.placeholder = std::find(ph.begin(), ph.end(), old) - ph.begin();
    } else {
      m.target = self;
    }
    s.written.push_back({self, m});
  }
  s.known[self.impl()] = v;
}

// An input's geometry with a symbol for each dynamic dim of size >= 2, strides dense in the
// same dim order as the real ones; nullopt when no dim is symbolic.
std::optional<SymLayout> Tracer::State::symbolic_layout(const TensorMeta& m,
                                                        const std::string& name, uint64_t dynamic) {
  auto log = [&](const std::string& text) { debug::log("dynamic", options.name, text); };
  std::optional<std::vector<size_t>> order = dense_order(m);
  if (!order) {
    log(name + ": strides " + shape_str(m.strides) + " are not dense in any dim order: static");
    return std::nullopt;
  }
  if (!graph->shape_env()) {
    auto env = std::make_shared<ShapeEnv>();
    env->on_event = [log](const std::string& text) { log(text); };
    graph->set_shape_env(std::move(env));
  }
  ShapeEnv& env = *graph->shape_env();
  SymShape sizes;
  bool any = false;
  for (size_t d = 0; d < m.sizes.size(); ++d) {
    const std::string source = name + ".size(" + std::to_string(d) + ")";
    if (!(dynamic >> d & 1) || m.sizes[d] < 2) {
      if (dynamic >> d & 1)
        log(source + " = " + std::to_string(m.sizes[d]) +
            ": specialised (sizes 0 and 1 are never symbolic)");
      sizes.push_back(sym::constant(m.sizes[d]));
      continue;
    }
    sizes.push_back(env.create_symbol(m.sizes[d], source));
    any = true;
  }
  if (!any) return std::nullopt;
  SymShape strides(sizes.size());
  sym::Expr expected = sym::constant(1);
  for (size_t i = order->size(); i-- > 0;) {
    strides[(*order)[i]] = expected;
    expected = expected * sizes[(*order)[i]];
  }
  return SymLayout{sizes, strides, sym::constant(m.offset)};
}

Node* Tracer::State::current_value(const Tensor& t) {
  if (Proxy* p = proxy_of(t, this)) return p->node;
  return known.at(t.impl());
}

std::vector<Node*> Tracer::State::mutation_nodes() {
  std::vector<Node*> out;
  for (const auto& w : written) out.push_back(current_value(w.self));
  return out;
}

void Tracer::State::start_segment() {
  for (auto& [impl, v] : real_views) v.node = nullptr;
  graph = std::make_shared<Graph>();
  segment_inputs.clear();
  known.clear();
  produced.clear();
  written.clear();
}

void mark_written_back(Graph& graph, const std::vector<Mutation>& mutations, size_t num_results) {
  std::vector<std::pair<size_t, size_t>> written;
  for (size_t k = 0; k < mutations.size(); ++k)
    if (mutations[k].placeholder >= 0)
      written.push_back({num_results + k, static_cast<size_t>(mutations[k].placeholder)});
  graph.set_written_back(std::move(written));
}

std::vector<Tensor> run_with_mutations(const CompiledGraph& cg, const std::vector<Tensor>& inputs,
                                       const std::vector<Mutation>& mutations, size_t num_results) {
  auto target = [&](const Mutation& m) -> const Tensor& {
    return m.placeholder >= 0 ? inputs[static_cast<size_t>(m.placeholder)] : m.target;
  };
  // Each tensor the call writes counts one in-place write, as the eager ops' would: autograd
  // then knows that a value it saved before the call has changed. Counted before the graph
  // runs, so that what the call itself saves for its backward (a compiled training graph's
  // node) holds the version its own write-back leaves.
  for (const Mutation& m : mutations) ++target(m).impl()->storage->version;
  std::vector<Tensor> outs = cg.run(inputs);
  for (size_t k = 0; k < mutations.size(); ++k) {
    const Tensor &to = target(mutations[k]), &from = outs[num_results + k];
    // (A result the compiled code wrote into its input's memory is there already.)
    const bool there = from.impl()->storage == to.impl()->storage &&
                       from.impl()->meta.offset == to.impl()->meta.offset &&
                       from.sizes() == to.sizes() && from.strides() == to.strides();
    if (!there) copy_into(to, from);
  }
  outs.resize(num_results);
  return outs;
}

// Runs the pending segment and gives every live proxy its real data.
void Tracer::State::flush() {
  std::vector<std::shared_ptr<TensorImpl>> live;
  for (const auto& w : produced) {
    auto impl = w.lock();
    if (impl && proxy_of(Tensor(impl), this)) live.push_back(impl);
  }
  std::vector<std::optional<ViewOf>> views;
  std::vector<Node*> outputs;
  {
    DispatchHookScope tracing(owner);  // a stale view is taken again first
    for (const auto& impl : live) {
      outputs.push_back(node_of(Tensor(impl)));
      views.push_back(proxy_of(Tensor(impl), this)->view);
    }
  }
  std::vector<Mutation> mutations;
  for (const auto& w : written) mutations.push_back(w.where);
  for (Node* n : mutation_nodes()) outputs.push_back(n);
  graph->output(outputs);
  mark_written_back(*graph, mutations, live.size());
  CompiledGraph cg = compile_segment(graph);
  std::vector<Tensor> outs = run_with_mutations(cg, segment_inputs, mutations, live.size());
  for (size_t i = 0; i < live.size(); ++i) {
    live[i]->storage = outs[i].impl()->storage;
    live[i]->meta = outs[i].impl()->meta;
    live[i]->proxy.reset();
    per_call.insert(live[i].get());
  }
  // The function's inputs (whose proxies live in the first segment) become the caller's
  // tensors themselves, so later in-place updates reach the caller.
  for (size_t k = 0; k < input_proxies.size(); ++k) {
    TensorImpl& impl = *input_proxies[k].impl();
    if (!impl.proxy) continue;
    impl.storage = real_inputs[k].impl()->storage;
    impl.meta = real_inputs[k].impl()->meta;
    impl.proxy.reset();
    per_call.insert(&impl);
  }
  // Views become real views of their (now real) bases again, sharing their memory, and
  // writes into them keep going to their bases.
  for (size_t i = 0; i < live.size(); ++i) {
    if (!views[i]) continue;
    Tensor v = views[i]->base;
    for (const ViewStep& step : views[i]->steps) v = apply_view(step, v);
    live[i]->storage = v.impl()->storage;
    live[i]->meta = v.impl()->meta;
    real_views[live[i].get()] = {live[i], *views[i], nullptr};
  }
  start_segment();
}

void Tracer::graph_break(TensorImpl& proxy, const char* what, const std::source_location& where) {
  State& s = *state_;
  std::string loc = std::string(where.file_name()) + ":" + std::to_string(where.line());
  COIL_CHECK(!s.options.fullgraph, "graph break in '", s.options.name, "' (fullgraph=true): ", what,
             " at ", loc,
             " needs a tensor's value, which a captured graph cannot know in advance; remove the "
             "data-dependent code or compile with fullgraph=false");
  bump(Counter::graph_breaks);
  debug::log("graph_breaks", s.options.name, "graph break: " + std::string(what) + " at " + loc);
  s.broke = true;
  DispatchHookScope running(nullptr);  // the segment runs for real
  s.flush();
}

std::shared_ptr<Graph> Tracer::finish(std::vector<Tensor>& results,
                                      std::vector<Mutation>& mutations) {
  State& s = *state_;
  if (!s.broke) {
    std::vector<Node*> outputs;
    for (const Tensor& r : results) outputs.push_back(s.node_of(r));
    for (const auto& w : s.written) mutations.push_back(w.where);
    for (Node* n : s.mutation_nodes()) outputs.push_back(n);
    s.graph->output(outputs);
    mark_written_back(*s.graph, mutations, results.size());
    return s.graph;
  }
  s.flush();
  return nullptr;
}

}  // namespace coil::capture
