// verify(): the graph invariants listed in graph.h, checked one by one so that a broken pass
// is caught at the node it broke, with the rule it broke.
#include <algorithm>
#include <unordered_set>

#include "graph/graph_util.h"
#include "graph/printer.h"

namespace coil {

namespace {

[[noreturn]] void fail(const Node* n, const std::string& what) {
  throw InternalError("graph verification failed at node '" + n->name() + "' (" +
                      node_kind_name(n->kind()) + "): " + what);
}

std::string metas_str(const std::vector<TensorMeta>& ms) {
  std::string s = "(";
  for (size_t i = 0; i < ms.size(); ++i) s += (i ? ", " : "") + meta_str(ms[i]);
  return s + ")";
}

class Verifier {
 public:
  explicit Verifier(const Graph& g) : g_(g), nodes_(g.nodes()) {
    live_.insert(nodes_.begin(), nodes_.end());
  }

  void run() {
    check_order_and_names();
    for (const Node* n : nodes_) {
      check_inputs(n);
      check_users(n);
      check_kind(n);
    }
  }

 private:
  void check_order_and_names() {
    std::unordered_set<std::string> names;
    size_t outputs = 0;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const Node* n = nodes_[i];
      if (n->graph() != &g_) fail(n, "its graph pointer names another graph");
      if (!detail_graph::is_identifier(n->name()) || detail_graph::is_reserved_name(n->name()))
        fail(n, "its name is not a valid identifier");
      if (!names.insert(n->name()).second) fail(n, "another node has the same name");
      if (g_.find(n->name()) != n) fail(n, "the graph's name table does not map its name to it");
      if (i > 0 && !nodes_[i - 1]->is_before(n))
        fail(n, "its position number is not after that of '" + nodes_[i - 1]->name() + "'");
      if (n->kind() == NodeKind::Placeholder && i > 0 &&
          nodes_[i - 1]->kind() != NodeKind::Placeholder)
        fail(n, "a placeholder comes after '" + nodes_[i - 1]->name() +
                    "'; placeholders must come first");
      if (n->kind() == NodeKind::Output) {
        ++outputs;
        if (i + 1 != nodes_.size()) fail(n, "the output node is not the last node");
      }
    }
    if (outputs != 1)
      throw InternalError("graph verification failed: the graph has " + std::to_string(outputs) +
                          " output nodes; it needs exactly one");
  }

  // Every input is a live node of this graph, earlier in the order, and a single tensor
  // (except the source of a getitem, which must be a multi-output call).
  void check_inputs(const Node* n) {
    for (const NodeArg& a : n->args()) {
      std::vector<Node*> ins;
      if (auto* p = std::get_if<Node*>(&a)) ins.push_back(*p);
      if (auto* v = std::get_if<std::vector<Node*>>(&a)) ins = *v;
      for (const Node* in : ins) {
        if (!live_.count(in)) fail(n, "an argument is not a node of this graph (erased?)");
        if (!in->is_before(n))
          fail(n, "its input '" + in->name() + "' does not come before it (topological order)");
        if (in->kind() == NodeKind::Output) fail(n, "it takes the output node as an argument");
        bool getitem_source = n->kind() == NodeKind::GetItem && &a == &n->args()[0];
        if (!getitem_source && in->meta().size() != 1)
          fail(n, "its input '" + in->name() + "' has " + std::to_string(in->meta().size()) +
                      " outputs; a getitem must pick one");
      }
    }
  }

  // Users lists are exactly the inverse of the inputs, without duplicates.
  void check_users(const Node* n) {
    for (const Node* in : n->inputs()) {
      const auto& u = in->users();
      if (std::find(u.begin(), u.end(), n) == u.end())
        fail(in, "'" + n->name() + "' takes it as an argument but is not in its users list");
    }
    std::unordered_set<const Node*> seen;
    for (const Node* u : n->users()) {
      if (!live_.count(u)) fail(n, "its users list holds a node not in the graph (erased?)");
      if (!seen.insert(u).second) fail(n, "'" + u->name() + "' is twice in its users list");
      auto ins = u->inputs();
      if (std::find(ins.begin(), ins.end(), n) == ins.end())
        fail(n, "its users list holds '" + u->name() + "', which does not take it as an argument");
    }
  }

  void check_kind(const Node* n) {
    switch (n->kind()) {
      case NodeKind::Placeholder:
      case NodeKind::Parameter:
      case NodeKind::Constant:
        check_leaf(n);
        break;
      case NodeKind::Call:
        check_call(n);
        break;
      case NodeKind::GetItem:
        check_getitem(n);
        break;
      case NodeKind::Output:
        check_output(n);
        break;
    }
  }

  void check_leaf(const Node* n) {
    if (!n->args().empty()) fail(n, "it has arguments");
    if (n->meta().size() != 1) fail(n, "it must describe exactly one tensor");
    if (n->kind() == NodeKind::Placeholder) return;
    if (!n->value().defined()) fail(n, "it holds no tensor");
    if (n->kind() == NodeKind::Constant && !n->value().has_storage())
      fail(n, "the constant has no data");
    if (!(meta_of(n->value()) == n->tensor_meta()))
      fail(n, "its meta " + meta_str(n->tensor_meta()) + " is not its tensor's " +
                  meta_str(meta_of(n->value())));
  }

  void check_call(const Node* n) {
    const OpInfo& info = op_info(n->op());
    const auto& params = info.schema.args;
    if (n->args().size() != params.size())
      fail(n, std::string("coil.") + info.name + " has " + std::to_string(n->args().size()) +
                  " arguments but its schema " + info.schema.str() + " has " +
                  std::to_string(params.size()));
    std::vector<Arg> margs = detail_graph::meta_args(n->args());
    for (size_t i = 0; i < params.size(); ++i) {
      if (!arg_matches(margs[i], params[i].type, info.kind == OpKind::Pointwise))
        fail(n, "argument '" + params[i].name + "' is " + arg_kind_name(margs[i]) +
                    " but the schema wants " + params[i].type);
    }
    std::vector<TensorMeta> meta;
    try {
      meta = run_meta(n->op(), margs);
    } catch (const Error& e) {
      fail(n, std::string("the meta function rejects its arguments: ") + e.what());
    }
    if (meta != n->meta())
      fail(n, "its stored meta " + metas_str(n->meta()) + " differs from what coil." + info.name +
                  " computes: " + metas_str(meta));
  }

  void check_getitem(const Node* n) {
    if (n->args().size() != 2 || !std::holds_alternative<Node*>(n->args()[0]) ||
        !std::holds_alternative<int64_t>(n->args()[1]))
      fail(n, "a getitem's arguments must be {source node, index}");
    const Node* src = n->source();
    if (!src->is_multi_output()) fail(n, "its source '" + src->name() + "' is not multi-output");
    if (n->index() < 0 || n->index() >= static_cast<int64_t>(src->meta().size()))
      fail(n, "index " + std::to_string(n->index()) + " is out of range for '" + src->name() + "'");
    if (n->meta().size() != 1 || !(n->tensor_meta() == src->meta()[n->index()]))
      fail(n, "its meta " + metas_str(n->meta()) + " is not output " + std::to_string(n->index()) +
                  " of '" + src->name() + "'");
  }

  void check_output(const Node* n) {
    if (n->args().size() != 1 || !std::holds_alternative<std::vector<Node*>>(n->args()[0]))
      fail(n, "the output node's argument must be the list of results");
    if (!n->meta().empty()) fail(n, "the output node has meta");
    if (!n->users().empty()) fail(n, "the output node has users");
  }

  const Graph& g_;
  std::vector<Node*> nodes_;
  std::unordered_set<const Node*> live_;
};

}  // namespace

void verify(const Graph& g) { Verifier(g).run(); }

}  // namespace coil
