#include "aot/partitioner.h"

#include <algorithm>
#include <limits>
#include <queue>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace coil::aot {

namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;
// A reduction reading more than this is saved rather than recomputed.
constexpr int64_t kMaxRecomputedReductionBytes = 64 << 10;

int64_t bytes_of(const TensorMeta& m) {
  return m.numel() * static_cast<int64_t>(itemsize(m.dtype));
}

bool is_random(OpId op) {
  return op == OpId::rand || op == OpId::randn || op == OpId::randint || op == OpId::dropout;
}

// Why a forward node must not be recomputed in the backward, or nullptr when it may be.
const char* banned_from_recompute(const Node* n) {
  if (n->kind() == NodeKind::Placeholder) return "an input";
  if (n->kind() != NodeKind::Call) return nullptr;
  if (is_random(n->op())) return "random";
  switch (op_info(n->op()).kind) {
    case OpKind::Extern:
      return "a library call (matmul, convolution)";
    case OpKind::Other:
    case OpKind::Composite:
      return "not a fusible pointwise or view op";
    case OpKind::Reduction: {
      int64_t in = 0;
      for (const Node* u : n->inputs())
        if (u->meta().size() == 1) in = std::max(in, bytes_of(u->tensor_meta()));
      return in > kMaxRecomputedReductionBytes ? "a large reduction" : nullptr;
    }
    default:
      return nullptr;
  }
}

// Available to both graphs at no cost: captured parameters and literal constants.
bool is_free(const Node* n) {
  return n->kind() == NodeKind::Parameter || n->kind() == NodeKind::Constant;
}

// A recomputed value may read at most this many values of the forward (saved or recomputed at
// their own cost).
constexpr size_t kMaxRecomputeReads = 4;

// Forward nodes that may be recomputed but would read more than kMaxRecomputeReads values that
// are not: a residual stream x_i = x_{i-1} + a_i recomputed whole reads every earlier a_i, so
// each layer's backward redoes the sum of all before it (work quadratic in depth, and kernels
// whose code grows with it). The min cut never sees that cost (recomputing is free to it), so
// these nodes are saved instead, and what reads them recomputes from them. `forward` is in
// topological order.
std::unordered_set<const Node*> too_wide_to_recompute(const std::vector<const Node*>& forward) {
  std::unordered_set<const Node*> wide;
  std::unordered_map<const Node*, std::vector<const Node*>> reads;  // of recomputable nodes
  for (const Node* n : forward) {
    if (banned_from_recompute(n)) continue;
    std::vector<const Node*>& r = reads[n];
    for (const Node* u : n->inputs()) {
      if (is_free(u)) continue;
      auto it = reads.find(u);
      const bool source = it == reads.end() || wide.count(u);
      for (const Node* v : source ? std::vector<const Node*>{u} : it->second)
        if (std::find(r.begin(), r.end(), v) == r.end() && r.size() <= kMaxRecomputeReads)
          r.push_back(v);
    }
    if (r.size() > kMaxRecomputeReads) wide.insert(n);
  }
  return wide;
}

// Whether the forward writes `n` to memory whatever is saved: an input, a library call's or
// other unfusible op's result, or a value such an op (or the forward's result) reads. Saving a
// value the forward's kernels would otherwise keep in registers costs a write in the forward
// and a read in the backward, so the cut weighs it double (as Inductor's partitioner does):
// of a loss's softmax gradient and the logits it is computed from, both as large, the logits
// are kept.
bool materialized(const Node* n) {
  auto fusible = [](const Node* u) {
    if (u->kind() == NodeKind::GetItem) return true;
    if (u->kind() != NodeKind::Call) return false;
    const OpKind k = op_info(u->op()).kind;
    return k != OpKind::Extern && k != OpKind::Other && k != OpKind::Composite;
  };
  if (n->kind() != NodeKind::Call || !fusible(n)) return true;
  return !std::all_of(n->users().begin(), n->users().end(), fusible);
}

// Whether a library call of the backward (a weight gradient's product) reads `n`, directly or
// through views. Recomputing such a value in the backward writes it to memory a second time,
// while saving it costs nothing the forward does not already do when the forward wrote it too
// (it fed the forward's own product); so, as in Inductor's partitioner, it is not recomputed:
// the min cut counts saved bytes only and would rather recompute a GELU's output than save it
// beside its input. A factory (no inputs: the zeros an embedding's gradient is scattered into)
// is the exception: the forward writes it only to save it, so it is made in the backward, where
// it is read, and is not kept alive in between.
bool read_by_backward_library_call(const Node* n,
                                   const std::unordered_set<const Node*>& tangent_dependent) {
  auto kind = [](const Node* m) {
    return m->kind() == NodeKind::Call ? op_info(m->op()).kind : OpKind::Pointwise;
  };
  if (n->kind() != NodeKind::Call || kind(n) == OpKind::View || kind(n) == OpKind::Factory ||
      !materialized(n))
    return false;
  std::vector<const Node*> stack{n};
  while (!stack.empty()) {
    const Node* m = stack.back();
    stack.pop_back();
    for (const Node* u : m->users()) {
      if (u->kind() != NodeKind::Call) continue;
      const OpKind k = kind(u);
      if (k == OpKind::View)
        stack.push_back(u);
      else if (tangent_dependent.count(u) &&
               (k == OpKind::Extern || k == OpKind::Other || k == OpKind::Composite))
        return true;
    }
  }
  return false;
}

// Dinic's maximum flow, then the source side of the minimum cut.
class FlowNetwork {
 public:
  explicit FlowNetwork(int n) : adj_(n), level_(n), next_(n) {}
  void add_edge(int u, int v, int64_t cap) {
    adj_[u].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({v, cap});
    adj_[v].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({u, 0});
  }
  int64_t max_flow(int s, int t) {
    int64_t flow = 0;
    while (bfs(s, t)) {
      std::fill(next_.begin(), next_.end(), 0);
      while (int64_t f = dfs(s, t, kInf)) flow += f;
    }
    return flow;
  }
  // Nodes reachable from s in the residual network.
  std::vector<bool> source_side(int s) const {
    std::vector<bool> seen(adj_.size(), false);
    std::vector<int> stack{s};
    seen[s] = true;
    while (!stack.empty()) {
      int u = stack.back();
      stack.pop_back();
      for (int e : adj_[u])
        if (edges_[e].cap > 0 && !seen[edges_[e].to]) {
          seen[edges_[e].to] = true;
          stack.push_back(edges_[e].to);
        }
    }
    return seen;
  }

 private:
  struct Edge {
    int to;
    int64_t cap;
  };
  bool bfs(int s, int t) {
    std::fill(level_.begin(), level_.end(), -1);
    std::queue<int> q;
    level_[s] = 0;
    q.push(s);
    while (!q.empty()) {
      int u = q.front();
      q.pop();
      for (int e : adj_[u])
        if (edges_[e].cap > 0 && level_[edges_[e].to] < 0) {
          level_[edges_[e].to] = level_[u] + 1;
          q.push(edges_[e].to);
        }
    }
    return level_[t] >= 0;
  }
  int64_t dfs(int u, int t, int64_t f) {
    if (u == t) return f;
    for (; next_[u] < static_cast<int>(adj_[u].size()); ++next_[u]) {
      Edge& e = edges_[adj_[u][next_[u]]];
      if (e.cap <= 0 || level_[e.to] != level_[u] + 1) continue;
      if (int64_t d = dfs(e.to, t, std::min(f, e.cap))) {
        e.cap -= d;
        edges_[adj_[u][next_[u]] ^ 1].cap += d;
        return d;
      }
    }
    return 0;
  }
  std::vector<Edge> edges_;
  std::vector<std::vector<int>> adj_;
  std::vector<int> level_, next_;
};

NodeArg remap(const NodeArg& a, const std::unordered_map<const Node*, Node*>& map) {
  if (auto* n = std::get_if<Node*>(&a)) return map.at(*n);
  if (auto* ns = std::get_if<std::vector<Node*>>(&a)) {
    std::vector<Node*> out;
    for (Node* n : *ns) out.push_back(map.at(n));
    return out;
  }
  return a;
}

// A dynamic graph's value as an input of a half: its geometry over the symbols (an input of
// the joint graph as it declared them: they bind the symbols).
std::optional<SymLayout> symbolic_layout(const Node& n) {
  SymLayout l = n.sym_layout(0, /*as_made=*/n.kind() == NodeKind::Placeholder);
  if (l.is_static()) return std::nullopt;
  return l;
}

// A copy of `n` in `dst`, its inputs already copied (in `map`).
Node* copy_node(Graph& dst, const Node* n, std::unordered_map<const Node*, Node*>& map) {
  Node* c = nullptr;
  switch (n->kind()) {
    case NodeKind::Placeholder:
      c = dst.placeholder(n->name(), n->tensor_meta(), symbolic_layout(*n));
      break;
    case NodeKind::Parameter:
      c = dst.parameter(n->target(), n->value());
      break;
    case NodeKind::Constant:
      c = dst.constant(n->value());
      break;
    case NodeKind::Call: {
      std::vector<NodeArg> args;
      for (const NodeArg& a : n->args()) args.push_back(remap(a, map));
      c = dst.call(n->op(), std::move(args));
      break;
    }
    case NodeKind::GetItem:
      c = dst.getitem(map.at(n->source()), n->index());
      break;
    case NodeKind::Output:
      COIL_ASSERT(false, "the output node is not copied");
  }
  map[n] = c;
  return c;
}

// The nodes reachable from roots through inputs, stopping at (and leaving out) those `stop` says.
template <typename Stop>
std::unordered_set<const Node*> reachable(std::vector<const Node*> stack, Stop stop) {
  std::unordered_set<const Node*> seen;
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (stop(n) || !seen.insert(n).second) continue;
    for (const Node* u : n->inputs()) stack.push_back(u);
  }
  return seen;
}

// The joint graph's parts: its outputs split into the forward's and the gradients, and the
// backward part (everything that depends on a tangent).
struct JointParts {
  std::vector<Node*> nodes, placeholders, forward_outputs, grads;
  std::unordered_set<const Node*> tangent_dependent;
  bool in_forward_part(const Node* n) const {
    return !tangent_dependent.count(n) && !is_free(n) && n->kind() != NodeKind::Output;
  }
};

JointParts split_joint(const JointGraph& joint) {
  const Graph& g = *joint.graph;
  JointParts j{g.nodes(), g.placeholders(), {}, {}, {}};
  const std::vector<Node*>& outs = g.output_node()->results();
  j.forward_outputs.assign(outs.begin(), outs.begin() + joint.num_forward_outputs);
  j.grads.assign(outs.begin() + joint.num_forward_outputs, outs.end());
  for (size_t i = joint.num_primals; i < j.placeholders.size(); ++i)
    j.tangent_dependent.insert(j.placeholders[i]);
  for (const Node* n : j.nodes)
    for (const Node* u : n->inputs())
      if (j.tangent_dependent.count(u) && n->kind() != NodeKind::Output)
        j.tangent_dependent.insert(n);
  return j;
}

// What the backward reads from the forward part: inputs of the backward nodes the gradients
// need, and gradients that need no tangent at all (zeros for unused inputs).
std::unordered_set<const Node*> read_by_backward(const JointParts& j) {
  const auto backward_live = reachable({j.grads.begin(), j.grads.end()}, [&](const Node* n) {
    return !j.tangent_dependent.count(n);
  });
  std::unordered_set<const Node*> needed;
  for (const Node* n : backward_live)
    for (const Node* u : n->inputs())
      if (!j.tangent_dependent.count(u) && !is_free(u)) needed.insert(u);
  for (const Node* gr : j.grads)
    if (!j.tangent_dependent.count(gr) && !is_free(gr)) needed.insert(gr);
  return needed;
}

// The values to save: a minimum cut of the flow network over the forward part (node v is
// v_in = 2v, v_out = 2v + 1; cutting v's edge saves it), in the joint graph's order.
std::vector<const Node*> choose_saved(const JointParts& j,
                                      const std::unordered_set<const Node*>& needed) {
  std::unordered_map<const Node*, int> index;
  std::vector<const Node*> forward;
  for (const Node* n : j.nodes)
    if (j.in_forward_part(n)) {
      index.emplace(n, static_cast<int>(index.size()));
      forward.push_back(n);
    }
  const std::unordered_set<const Node*> wide = too_wide_to_recompute(forward);
  const int source = 2 * static_cast<int>(index.size()), sink = source + 1;
  FlowNetwork net(sink + 1);
  for (const auto& [n, i] : index) {
    const bool tuple = n->meta().size() != 1;  // a multi-output call: its items are saved
    net.add_edge(2 * i, 2 * i + 1,
                 tuple ? kInf : bytes_of(n->tensor_meta()) * (materialized(n) ? 1 : 2));
    if (banned_from_recompute(n) || wide.count(n) ||
        read_by_backward_library_call(n, j.tangent_dependent))
      net.add_edge(source, 2 * i, kInf);
    if (needed.count(n)) net.add_edge(2 * i + 1, sink, kInf);
    for (const Node* u : n->inputs())
      if (auto it = index.find(u); it != index.end()) net.add_edge(2 * it->second + 1, 2 * i, kInf);
  }
  net.max_flow(source, sink);
  const std::vector<bool> side = net.source_side(source);
  std::vector<const Node*> saved;
  for (const Node* n : forward) {
    const int i = index.at(n);
    if (side[2 * i] && !side[2 * i + 1]) saved.push_back(n);
  }
  return saved;
}

// The forward graph: the primals in, what the outputs and the saved values need, the outputs
// and then the saved values out.
std::shared_ptr<Graph> forward_graph(const JointGraph& joint, const JointParts& j,
                                     const std::vector<const Node*>& saved) {
  std::vector<const Node*> roots(j.forward_outputs.begin(), j.forward_outputs.end());
  roots.insert(roots.end(), saved.begin(), saved.end());
  const auto live = reachable(std::move(roots), [](const Node*) { return false; });
  auto g = std::make_shared<Graph>();
  g->set_shape_env(joint.graph->shape_env());  // both halves over the joint's symbols
  std::unordered_map<const Node*, Node*> map;
  for (const Node* n : j.nodes) {
    const bool primal = n->kind() == NodeKind::Placeholder && !j.tangent_dependent.count(n);
    if (primal || (live.count(n) && n->kind() != NodeKind::Placeholder)) copy_node(*g, n, map);
  }
  std::vector<Node*> results;
  for (const Node* n : j.forward_outputs) results.push_back(map.at(n));
  for (const Node* n : saved) results.push_back(map.at(n));
  g->output(results);
  return g;
}

// The backward graph: saved values and tangents in, the backward nodes and whatever forward
// nodes they need recomputed from the saved values, the gradients out.
void backward_graph(const JointGraph& joint, const JointParts& j,
                    const std::vector<const Node*>& saved, Partition& p) {
  const std::unordered_set<const Node*> saved_set(saved.begin(), saved.end());
  const auto live = reachable({j.grads.begin(), j.grads.end()},
                              [&](const Node* n) { return saved_set.count(n) > 0; });
  p.backward = std::make_shared<Graph>();
  p.backward->set_shape_env(joint.graph->shape_env());
  std::unordered_map<const Node*, Node*> map;
  for (const Node* n : saved) {
    map[n] = p.backward->placeholder("saved_" + n->name(), n->tensor_meta(), symbolic_layout(*n));
    p.saved_names.push_back(n->name());
  }
  for (size_t i = joint.num_primals; i < j.placeholders.size(); ++i)
    copy_node(*p.backward, j.placeholders[i], map);
  for (const Node* n : j.nodes) {
    if (!live.count(n) || map.count(n)) continue;
    COIL_ASSERT(n->kind() != NodeKind::Placeholder, "the backward graph needs input ", n->name(),
                " that the partition did not save");
    copy_node(*p.backward, n, map);
    if (!j.tangent_dependent.count(n) && !is_free(n)) p.recomputed_names.push_back(n->name());
  }
  std::vector<Node*> results;
  for (const Node* n : j.grads) results.push_back(map.at(n));
  p.backward->output(results);
}

}  // namespace

Partition partition(const JointGraph& joint) {
  const JointParts j = split_joint(joint);
  const std::unordered_set<const Node*> needed = read_by_backward(j);
  const std::vector<const Node*> saved = choose_saved(j, needed);
  Partition p;
  for (const Node* n : saved) p.saved_bytes += bytes_of(n->tensor_meta());
  for (const Node* n : needed) p.save_everything_bytes += bytes_of(n->tensor_meta());
  p.forward = forward_graph(joint, j, saved);
  p.num_saved = saved.size();
  backward_graph(joint, j, saved, p);
  return p;
}

std::string Partition::report() const {
  std::ostringstream os;
  os << "saved " << saved_names.size() << " values (" << saved_bytes << " bytes; saving every "
     << "forward value the backward reads would be " << save_everything_bytes << " bytes)";
  os << "\nsaved:";
  for (const auto& n : saved_names) os << " " << n;
  os << "\nrecomputed in the backward:";
  for (const auto& n : recomputed_names) os << " " << n;
  if (recomputed_names.empty()) os << " (nothing)";
  return os.str();
}

}  // namespace coil::aot
