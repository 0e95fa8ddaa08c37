// The graph's in-place rewrites: replacing a node's uses, erasing and renaming nodes,
// recomputing metas downstream of a change, restoring topological order.
#include <algorithm>
#include <queue>
#include <unordered_set>

#include "graph/graph.h"
#include "graph/graph_util.h"

namespace coil {

namespace {
// Same dtypes, devices and sizes, symbolic sizes included (a rewrite that baked a size's hint
// into its replacement would compute a graph that holds only at that size).
bool same_values(const Node& a, const Node& b) {
  if (a.meta().size() != b.meta().size()) return false;
  for (size_t i = 0; i < a.meta().size(); ++i) {
    const TensorMeta &x = a.meta()[i], &y = b.meta()[i];
    if (x.dtype != y.dtype || x.sizes != y.sizes || x.device != y.device) return false;
    // Equal under what the env learned (a symbol specialised between the two nodes' making).
    if (a.sym_layout(i).sizes != b.sym_layout(i).sizes) return false;
  }
  return true;
}

// Is `target` among the transitive inputs of `from`? Only nodes after `floor` can be.
bool reaches(const Node* from, const Node* target, const Node* floor) {
  std::vector<const Node*> stack{from};
  std::unordered_set<const Node*> seen;
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (n == target) return true;
    if (!seen.insert(n).second || !floor->is_before(n)) continue;
    for (Node* in : n->inputs()) stack.push_back(in);
  }
  return false;
}
}  // namespace

void Graph::replace_all_uses_with(Node* old_node, Node* new_node) {
  check_owned(old_node, "replaced node");
  check_owned(new_node, "replacement");
  if (old_node == new_node) return;
  COIL_ASSERT(same_values(*old_node, *new_node), "replace_all_uses_with: '", new_node->name_,
              "' does not produce the same dtypes and sizes as '", old_node->name_, "'");
  std::vector<Node*> users;
  for (Node* u : old_node->users_)
    if (u != new_node) users.push_back(u);
  for (Node* u : users)
    COIL_ASSERT(!reaches(new_node, u, old_node), "replace_all_uses_with: '", u->name_, "' uses '",
                old_node->name_, "' and is itself used to compute '", new_node->name_,
                "'; replacing would make a cycle");
  bool reorder = false;
  for (Node* u : users) {
    remove_use(u);
    detail_graph::substitute(u->args_, old_node, new_node);
    add_use(u);
    reorder |= u->is_before(new_node);
  }
  if (reorder) topological_sort();
  refresh_meta(users);
}

// Recomputes the meta of `start` and, where it changed, of everything downstream.
void Graph::refresh_meta(const std::vector<Node*>& start) {
  if (start.empty()) return;
  std::unordered_set<Node*> dirty(start.begin(), start.end());
  Node* first = *std::min_element(start.begin(), start.end(),
                                  [](Node* a, Node* b) { return a->is_before(b); });
  for (auto it = first->self_; it != nodes_.end() && !dirty.empty(); ++it) {
    Node* n = it->get();
    if (!dirty.erase(n)) continue;
    std::vector<TensorMeta> meta;
    try {
      meta = detail_graph::compute_meta(*n);
    } catch (const Error& e) {
      COIL_ASSERT(false, "after a rewrite, the meta function of '", n->name_,
                  "' rejects its new inputs: ", e.what());
    }
    const bool same_meta = meta == n->meta_;
    std::vector<SymLayout> sym = n->sym_;
    n->meta_ = std::move(meta);
    if (n->kind_ == NodeKind::Call || n->kind_ == NodeKind::GetItem) compute_sym(n);
    if (same_meta && n->sym_ == sym) continue;
    dirty.insert(n->users_.begin(), n->users_.end());
  }
}

void Graph::erase(Node* node) {
  check_owned(node, "erased node");
  if (!node->users_.empty()) {
    std::string names;
    for (Node* u : node->users_) names += (names.empty() ? "'" : ", '") + u->name_ + "'";
    COIL_ASSERT(false, "cannot erase '", node->name_, "': it is still used by ", names,
                "; replace its uses first (replace_all_uses_with)");
  }
  remove_use(node);
  by_name_.erase(node->name_);
  nodes_.erase(node->self_);
}

void Graph::set_name(Node* node, const std::string& name) {
  check_owned(node, "renamed node");
  if (name == node->name_) return;
  COIL_CHECK(detail_graph::is_identifier(name), "'", name, "' is not a valid node name: use ",
             "letters, digits and '_', not starting with a digit");
  COIL_CHECK(!detail_graph::is_reserved_name(name), "'", name,
             "' is reserved and cannot name a node");
  COIL_CHECK(!by_name_.count(name), "the name '", name, "' is already taken by another node");
  by_name_.erase(node->name_);
  node->name_ = name;
  by_name_[name] = node;
}

// Kahn's algorithm, always taking the ready node that came first: nodes already in order
// stay where they are.
void Graph::topological_sort() {
  auto later = [](Node* a, Node* b) { return b->is_before(a); };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later)> ready(later);
  std::unordered_map<Node*, size_t> pending;
  for (auto& n : nodes_) {
    pending[n.get()] = n->inputs().size();
    if (pending[n.get()] == 0) ready.push(n.get());
  }
  std::list<std::unique_ptr<Node>> sorted;
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    sorted.splice(sorted.end(), nodes_, n->self_);
    for (Node* u : n->users_)
      if (--pending[u] == 0) ready.push(u);
  }
  if (!nodes_.empty()) {
    std::string names;
    for (auto& n : nodes_) names += (names.empty() ? "" : ", ") + n->name_;
    nodes_.splice(nodes_.end(), sorted);  // keep every node owned before failing
    COIL_ASSERT(false, "the graph has a cycle through: ", names);
  }
  nodes_ = std::move(sorted);
  renumber();
}

}  // namespace coil
